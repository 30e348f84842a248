"""The live dashboard in headless Chromium (Debian's), while traffic flows through the platform.

Live simulated traffic goes into Kafka; the real speed layer streams it into
Cassandra; the serving app serves the page and the answers; the browser must
show numbers that change as events arrive, the chart with provisional and
final buckets and the batch boundary, and the freshness of the speed side.
A screenshot is kept under ``.platform/artifacts/``.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from core.settings import KafkaSettings, LakeSettings, Settings, SpeedSettings
from platformctl.demo_site import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def live_traffic(spark, serving_settings: Settings, tmp_path_factory):
    """The speed layer streaming while simulated visitors arrive in real time."""
    from confluent_kafka.admin import AdminClient

    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from ingest.topics import ensure_topics, platform_topics
    from speed_layer.job import start_queries
    from speed_layer.progress import ProgressRecorder

    root = tmp_path_factory.mktemp("dashboard")
    topic = serving_settings.cassandra.keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **serving_settings.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
        | {"suppressions_topic": f"{topic}.suppressions"}
    )
    settings = serving_settings.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "ck")),
            "speed": SpeedSettings(
                trigger="1 second", starting_offsets="earliest", pipelines=["web_events"]
            ),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    # freshness, as the speed layer's entry point does
    recorder = ProgressRecorder(settings, WEB_EVENTS.view_specs)
    listener = recorder.listener()
    spark.streams.addListener(listener)
    queries = start_queries(spark, settings, WEB_EVENTS)
    now = datetime.now(UTC)
    events = sorted(
        generate(SimulatorConfig(seed=3, events=None, duration_s=240, rate=25, start=now)),
        key=lambda e: e.sent_at,
    )
    stop = threading.Event()

    def send() -> None:  # each event when its time comes, as browsers would send them
        sent = 0
        while sent < len(events) and not stop.is_set():
            due = datetime.now(UTC)
            chunk = []
            while sent < len(events) and events[sent].sent_at <= due:
                chunk.append(events[sent])
                sent += 1
            if chunk:
                produce_direct(chunk, settings)
            stop.wait(0.5)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    yield settings
    stop.set()
    sender.join(30)
    for query in queries:
        query.stop()
    spark.streams.removeListener(listener)
    recorder.close()
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "Debian's chromium and chromium-driver are missing: run `make install` "
        "(platformctl install provides them)."
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        *CHROMIUM_FLAGS,
        "--window-size=1400,1100",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def _number(driver, element_id: str) -> int | None:
    text = driver.find_element("id", element_id).text.replace(",", "").strip()
    return int(text) if text.isdigit() else None


def _wait(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"The dashboard did not {what} within {timeout_s:.0f}s.")


def test_the_dashboard_shows_live_numbers_that_change(
    live_traffic, serving_url, api_token, publish, browser, settings: Settings
) -> None:
    # A batch run published a boundary half an hour ago (no events before the traffic).
    boundary = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    publish("site_activity", [], boundary, days=[])

    browser.get(f"{serving_url}/dashboard#token={api_token}&every=2")
    first = _wait(lambda: _number(browser, "views-total"), 120, "show page views")
    _wait(lambda: (_number(browser, "views-total") or 0) > first, 60, "update its numbers")
    assert _number(browser, "events-now") is not None or _number(browser, "events-last")
    assert (_number(browser, "reach") or 0) > 0

    chart = browser.find_element("id", "chart")
    assert chart.find_elements("css selector", "rect.bucket.provisional")
    assert chart.find_elements("css selector", "rect.bucket.final")
    assert chart.find_elements("css selector", "rect.band.final")
    assert chart.find_elements("css selector", "rect.band.provisional")
    assert chart.find_elements("id", "boundary-line")
    assert "behind" in browser.find_element("id", "freshness").text
    assert boundary.strftime("%Y-%m-%d %H:%M") in browser.find_element("id", "boundary").text
    rows = browser.find_elements("css selector", "#top-pages tbody tr td.key")
    assert rows and rows[0].text.startswith("/")
    _wait(
        lambda: browser.find_elements("css selector", "#slowest tbody tr td.num"),
        30,
        "list the slowest pages",
    )
    assert int(browser.find_element("id", "updated").text) >= 2
    assert browser.find_element("id", "error").text == ""

    artifacts = settings.local.state_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    shot = artifacts / "dashboard.png"
    browser.save_screenshot(str(shot))
    print(f"dashboard screenshot: {shot}")
    assert shot.stat().st_size > 10_000


def test_the_dashboard_asks_for_a_token_and_rejects_a_wrong_one(serving_url, browser) -> None:
    browser.get(f"{serving_url}/dashboard#token=wrong-token")
    _wait(lambda: browser.find_element("id", "login").is_displayed(), 10, "ask for a token")
    assert not browser.find_element("id", "app").is_displayed()


def test_the_dashboard_shows_another_pipeline_s_views(
    serving_url, api_token, publish, browser
) -> None:
    """A pipeline without the web panel's views gets a card per view: its top keys, merged."""
    boundary = datetime.now(UTC).replace(second=0, microsecond=0)
    start = boundary - timedelta(minutes=10)
    orders = [("EUR", 3), ("USD", 2), ("EUR", 4)]
    rows = [
        {"window_start": start + timedelta(minutes=i), "currency": currency, "orders": n}
        | {"refunds": 0, "revenue_minor": 1000 * n, "buyers": None, "order_value": None}
        for i, (currency, n) in enumerate(orders)
    ]
    publish("orders_by_currency", rows, boundary)

    browser.get(f"{serving_url}/dashboard#token={api_token}&pipeline=checkouts&every=2")
    table = 'table.pipeline-view[data-view="orders_by_currency"] tbody tr'
    found = _wait(lambda: browser.find_elements("css selector", table), 60, "show the orders")
    shown = {
        cells[0].text: cells[1].text
        for cells in (row.find_elements("css selector", "td") for row in found)
    }
    assert shown == {"EUR": "7", "USD": "2"}
    assert browser.find_element("id", "title").text == "checkouts, live"
    assert not browser.find_element("id", "web").is_displayed()
    assert browser.find_element("id", "error").text == ""
