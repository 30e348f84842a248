"""A batch layer stalled for longer than the speed TTL: unavailable windows, not silent zeros.

The speed TTL is the platform's default (3 days). ``page_activity``'s batch boundary is
stuck four days ago: batch holds the hour before it; the speed rows of the days after it
are gone (expired), those of the last half hour are there. ``site_activity``'s boundary
is an hour old; the batch layer never published ``clicks``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import datasketches as ds
import pytest

from views.common import HLL_LG_K

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
HOUR = timedelta(hours=1)
BOUNDARY = NOW.replace(minute=0) - timedelta(days=4)
RECENT = [NOW - timedelta(minutes=i) for i in range(1, 31)]


def _hll(ids) -> bytes:
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    for i in ids:
        sketch.update(i)
    return sketch.serialize_compact()


def _page(start, views) -> dict:
    return {
        "window_start": start,
        "path": "/a",
        "page_views": views,
        "visitors": _hll([f"u{i}" for i in range(views)]),
        "load_count": 0,
        "load_sum": None,
        "load_max": None,
        "load_sketch": None,
    }


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module", autouse=True)
def rows(publish, write_speed, serving_settings) -> None:
    # The clock is read when the rows are written, not when the module was collected:
    # in a whole-suite run that can be half an hour earlier than these tests run.
    global NOW, BOUNDARY, RECENT
    NOW = datetime.now(UTC).replace(second=0, microsecond=0)
    BOUNDARY = NOW.replace(minute=0) - timedelta(days=4)
    RECENT = [NOW - timedelta(minutes=i) for i in range(1, 31)]
    assert serving_settings.speed.ttl_s == 3 * 24 * 3600
    before = [BOUNDARY - timedelta(minutes=i) for i in range(1, 61)]
    publish("page_activity", [_page(m, 1) for m in before], BOUNDARY)
    write_speed("page_activity", [_page(m, 5) for m in RECENT])
    site = {"site": "all", "events": 1, "page_views": 1, "sessions_started": 0}
    publish(
        "site_activity",
        [{"window_start": NOW - 2 * HOUR, **site, "visitors": _hll(["v"])}],
        NOW - HOUR,
    )


def _get(api, path, **params) -> dict:
    answer = api.get(path, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_windows_after_a_stuck_boundary_older_than_the_ttl_are_unavailable(api) -> None:
    answer = _get(
        api,
        "/v1/timeseries",
        view="page_activity",
        key="/a",
        start=_iso(BOUNDARY - HOUR),
        end=_iso(BOUNDARY + HOUR),
    )
    buckets = answer["series"][0]["buckets"]
    assert len(buckets) == 120
    assert {(b["page_views"], b["available"], b["source"]) for b in buckets[:60]} == {
        (1, True, "batch")
    }
    assert {
        (b["page_views"], b["visitors"], b["load_sketch_p95"], b["available"], b["final"])
        for b in buckets[60:]
    } == {(None, None, None, False, False)}
    said = answer["unavailable"]
    assert (said["start"], said["end"]) == (_iso(BOUNDARY), _iso(BOUNDARY + HOUR))
    assert "unavailable, not zero" in said["message"] and "259200 s" in said["message"]
    assert answer["boundary_age_s"]["page_activity"] >= 4 * 86400


def test_hourly_buckets_are_unavailable_up_to_the_ttl_and_answered_after_it(api) -> None:
    answer = _get(
        api,
        "/v1/timeseries",
        view="page_activity",
        key="/a",
        start=_iso(BOUNDARY - HOUR),
        end=_iso(NOW),
        granularity="hour",
    )
    cutoff = NOW - timedelta(days=3)
    for bucket in answer["series"][0]["buckets"]:
        start = datetime.fromisoformat(bucket["start"])
        if start < BOUNDARY:
            assert (bucket["available"], bucket["page_views"]) == (True, 60)
        elif start + HOUR <= cutoff - timedelta(minutes=1):
            assert (bucket["available"], bucket["page_views"]) == (False, None), bucket
        elif start >= cutoff + timedelta(minutes=5):
            assert bucket["available"] and bucket["page_views"] is not None, bucket
    recent = _get(api, "/v1/timeseries", view="page_activity", key="/a", start="now-45m")
    assert recent["unavailable"] is None
    assert sum(b["page_views"] for b in recent["series"][0]["buckets"]) == 5 * 30


def test_a_view_the_batch_never_published_is_unavailable_beyond_the_ttl(api) -> None:
    answer = _get(
        api,
        "/v1/timeseries",
        view="clicks",
        key="/signup",
        start=_iso(NOW - timedelta(days=3, hours=2)),
        end=_iso(NOW - timedelta(days=3, hours=1)),
    )
    assert {b["clicks"] for b in answer["series"][0]["buckets"]} == {None}
    assert "never published" in answer["unavailable"]["message"]
    assert answer["boundary_age_s"]["clicks"] is None


def test_top_and_reach_say_what_is_unavailable(api) -> None:
    span = {"start": _iso(BOUNDARY - HOUR), "end": _iso(BOUNDARY + HOUR)}
    top = _get(api, "/v1/top", view="page_activity", measure="page_views", **span)
    assert [(i["key"]["path"], i["value"]) for i in top["items"]] == [("/a", 60)]
    assert top["final"] is False and top["unavailable"]["start"] == _iso(BOUNDARY)
    reach = _get(api, "/v1/reach", view="page_activity", key="/a", **span)
    assert reach["available"] is False and reach["visitors"] is None
    assert reach["unavailable"]["end"] == _iso(BOUNDARY + HOUR)
    fresh = _get(api, "/v1/reach", view="page_activity", key="/a", start="now-45m")
    assert fresh["available"] is True and fresh["visitors"] == 5


def test_health_is_degraded_naming_the_view_and_the_boundary_age(serving_url, api) -> None:
    answer = api.get("/health")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "degraded" and body["error"] == "batch_boundary_old"
    assert body["message"].startswith("page_activity: the batch boundary is ")
    assert "site_activity" not in body["message"] and "clicks" not in body["message"]
    ages = body["boundary_age_s"]
    assert ages["page_activity"] >= 4 * 86400
    assert 3600 <= ages["site_activity"] < 2 * 3600
    assert ages["clicks"] is None


def test_the_platform_probe_shows_the_degraded_status(serving_settings, serving_url) -> None:
    from platformctl.platform import serving_healthy

    healthy, detail = serving_healthy(serving_settings)
    assert healthy
    assert "/dashboard; DEGRADED page_activity: the batch boundary is " in detail
