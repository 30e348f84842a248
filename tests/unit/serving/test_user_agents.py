"""The user-agent dimension: families from ua-parser, bots from crawlerdetect."""

from __future__ import annotations

import pytest

from serving.connect.user_agents import describe

CHROME_WINDOWS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Safari/537.36"
)
IPHONE = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
)
PIXEL = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0.0.0 Mobile Safari/537.36"
)
IPAD = "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko)"
ANDROID_TABLET = (
    "Mozilla/5.0 (Linux; Android 14; SM-X700) AppleWebKit/537.36 Chrome/124 Safari/537.36"
)


@pytest.mark.parametrize(
    ("agent", "browser", "os", "device"),
    [
        (CHROME_WINDOWS, "Chrome", "Windows", "desktop"),
        (IPHONE, "Mobile Safari", "iOS", "mobile"),
        (PIXEL, "Chrome Mobile", "Android", "mobile"),
        (IPAD, None, "iOS", "tablet"),
        (ANDROID_TABLET, None, "Android", "tablet"),
    ],
)
def test_people_get_their_families_and_device(agent, browser, os, device):
    described = describe(agent)
    if browser is not None:
        assert described.browser == browser
    assert (described.os, described.device_type, described.is_bot) == (os, device, False)


@pytest.mark.parametrize(
    "agent",
    [
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
        "python-requests/2.31.0",
        "curl/8.5.0",
        "Mozilla/5.0 (compatible; AhrefsBot/7.0; +http://ahrefs.com/robot/)",
    ],
)
def test_crawlers_and_http_libraries_are_bots(agent):
    described = describe(agent)
    assert described.is_bot and described.device_type == "bot"


def test_no_user_agent_is_unknown_not_an_error():
    assert describe("").device_type == "unknown"
    assert describe("   ").is_bot is False
    assert describe("\x00garbage\uffff").device_type in {"desktop", "unknown", "bot"}


def test_a_silver_without_user_agents_makes_the_empty_dimension_without_a_python_worker(
    spark, tmp_path
):
    """Finding 8 of the pipelines' isolation: the first events without a user agent (Segment's
    Python library sends none) made an empty pandas frame, which Spark converts through a
    Python worker; the SQL server starts none, so every catalog refresh failed."""
    from serving.connect.host import NO_PYTHON_WORKERS
    from serving.connect.user_agents import refresh_user_agents

    silver, table = str(tmp_path / "silver"), str(tmp_path / "dims")
    spark.sql("SELECT named_struct('userAgent', CAST(NULL AS STRING)) AS context").write.format(
        "delta"
    ).save(silver)
    context = spark.sparkContext
    python = context.pythonExec
    context.pythonExec = str(NO_PYTHON_WORKERS)  # as on the SQL server
    try:
        assert refresh_user_agents(spark, silver, table) == 0
    finally:
        context.pythonExec = python
    dimension = spark.read.format("delta").load(table)
    assert dimension.count() == 0
    assert dimension.columns == ["user_agent", "browser", "os", "device_type", "is_bot"]
