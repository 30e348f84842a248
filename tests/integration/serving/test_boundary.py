"""The seam between the batch and speed views, on known rows in the real Cassandra, over HTTP.

Both layers hold rows for every minute of 2024-01-01 23:00 - 2024-01-02 01:00, with
different values, so an answer shows exactly which layer each window came from:
batch ``page_views`` are 1 (/a) and 3 (/b) per minute, speed ones 10 (/a) and 2 (/b).
The boundary is 2024-01-02 00:30.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import datasketches as ds
import pytest

from views.common import HLL_LG_K

pytestmark = pytest.mark.integration

T0 = datetime(2024, 1, 1, 23, 0, tzinfo=UTC)
BOUNDARY = datetime(2024, 1, 2, 0, 30, tzinfo=UTC)
MINUTES = [T0 + timedelta(minutes=i) for i in range(120)]
DAY1, DAY2 = date(2024, 1, 1), date(2024, 1, 2)
SPEED_TTL_S = 10 * 365 * 24 * 3600
"""The speed rows of 2024 are kept (and served as speed) for this module's questions."""


def _hll(ids) -> bytes:
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    for i in ids:
        sketch.update(i)
    return sketch.serialize_compact()


def _kll(values) -> bytes:
    sketch = ds.kll_doubles_sketch(200)
    for v in values:
        sketch.update(float(v))
    return sketch.serialize()


def _page(start, path, views, ids, load):
    return {
        "window_start": start,
        "path": path,
        "page_views": views,
        "visitors": _hll(ids),
        "load_count": 1,
        "load_sum": float(load),
        "load_max": float(load),
        "load_sketch": _kll([load]),
    }


def _site(start, events):
    ids = [f"v{i}" for i in range(events)]
    return {
        "window_start": start,
        "site": "all",
        "events": events,
        "page_views": events,
        "sessions_started": 0,
        "visitors": _hll(ids),
    }


BATCH_IDS = [f"b{i}" for i in range(10)]
SPEED_IDS = [f"s{i}" for i in range(20)]


@pytest.fixture(scope="module", autouse=True)
def rows(publish, write_speed, cql, serving_settings):
    page_batch, page_speed = [], []
    for m in MINUTES:
        page_batch += [_page(m, "/a", 1, BATCH_IDS, 100), _page(m, "/b", 3, BATCH_IDS, 200)]
        page_speed += [_page(m, "/a", 10, SPEED_IDS, 1000), _page(m, "/b", 2, SPEED_IDS, 50)]
    write_speed("page_activity", page_speed)
    publish("page_activity", page_batch, BOUNDARY)

    write_speed(
        "search_terms", [{"window_start": m, "query": "kafka", "searches": 10} for m in MINUTES]
    )
    # Day 1 has no published version: no events that day, whatever the speed rows say.
    publish(
        "search_terms",
        [{"window_start": m, "query": "kafka", "searches": 1} for m in MINUTES],
        BOUNDARY,
        days=[DAY2],
    )
    # The batch layer never ran for clicks.
    write_speed("clicks", [{"window_start": m, "target": "/signup", "clicks": 4} for m in MINUTES])

    write_speed("site_activity", [_site(m, 10) for m in MINUTES])
    publish("site_activity", [_site(m, 1) for m in MINUTES], BOUNDARY)

    keyspace = serving_settings.cassandra.keyspace
    cql.execute(
        f"INSERT INTO {keyspace}.speed_progress (view_name, max_event_time, watermark, "
        "heartbeat_at, kafka_lag) VALUES (%s, %s, %s, %s, %s)",
        ("page_activity", datetime(2024, 1, 2, 0, 59, 30, tzinfo=UTC), BOUNDARY, BOUNDARY, 7),
    )


def _series(api, view, key, start, end, granularity="minute", **params):
    query = {"view": view, "start": start, "end": end, "granularity": granularity} | params
    if key is not None:
        query["key"] = key
    answer = api.get("/v1/timeseries", params=query)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _total(answer, measure="page_views", series=0):
    return sum(b[measure] for b in answer["series"][series]["buckets"])


def test_a_range_entirely_before_the_boundary_is_final_batch(api) -> None:
    answer = _series(api, "page_activity", "/a", "2024-01-01T23:00:00Z", "2024-01-02T00:00:00Z")
    buckets = answer["series"][0]["buckets"]
    assert len(buckets) == 60
    assert {(b["page_views"], b["final"], b["source"]) for b in buckets} == {(1, True, "batch")}
    assert {b["visitors"] for b in buckets} == {10}
    assert {b["load_sketch_p95"] for b in buckets} == {100.0}
    assert answer["boundary"] == {"page_activity": "2024-01-02T00:30:00Z"}
    assert answer["series"][0]["key"] == {"path": "/a"}


def test_a_range_entirely_after_the_boundary_is_provisional_speed(api) -> None:
    answer = _series(api, "page_activity", "/a", "2024-01-02T00:30:00Z", "2024-01-02T01:00:00Z")
    buckets = answer["series"][0]["buckets"]
    assert len(buckets) == 30
    assert {(b["page_views"], b["final"], b["source"]) for b in buckets} == {(10, False, "speed")}


def test_a_straddling_range_takes_each_window_from_one_layer_only(api) -> None:
    answer = _series(api, "page_activity", "/a", "2024-01-02T00:00:00Z", "2024-01-02T01:00:00Z")
    buckets = answer["series"][0]["buckets"]
    assert _total(answer) == 30 * 1 + 30 * 10  # speed rows before the boundary never count
    assert [b["start"] for b in buckets if b["final"]][-1] == "2024-01-02T00:29:00Z"
    assert buckets[30]["start"] == "2024-01-02T00:30:00Z" and not buckets[30]["final"]


def test_coarser_buckets_mark_the_one_holding_the_boundary_provisional(api) -> None:
    hours = _series(
        api, "page_activity", "/a", "2024-01-01T23:00:00Z", "2024-01-02T01:00:00Z", "hour"
    )
    assert [(b["start"], b["page_views"], b["source"]) for b in hours["series"][0]["buckets"]] == [
        ("2024-01-01T23:00:00Z", 60, "batch"),
        ("2024-01-02T00:00:00Z", 330, "mixed"),
    ]
    days = _series(
        api, "page_activity", "/b", "2024-01-01T00:00:00Z", "2024-01-03T00:00:00Z", "day"
    )
    assert [(b["page_views"], b["final"]) for b in days["series"][0]["buckets"]] == [
        (60 * 3, True),
        (30 * 3 + 30 * 2 + 60 * 0, False),
    ]
    # Distinct visitors of the hour that holds the boundary: batch and speed ids, unioned.
    assert hours["series"][0]["buckets"][1]["visitors"] == pytest.approx(30, abs=1)


def test_an_empty_range_has_no_buckets(api) -> None:
    answer = _series(api, "page_activity", "/a", "2024-01-02T00:10:00Z", "2024-01-02T00:10:00Z")
    assert answer["series"][0]["buckets"] == []
    top = api.get(
        "/v1/top",
        params={
            "view": "page_activity",
            "measure": "page_views",
            "start": "2024-01-02T00:10:00Z",
            "end": "2024-01-02T00:10:00Z",
        },
    ).json()
    assert top["items"] == []


def test_a_view_whose_batch_never_ran_is_answered_from_speed(api) -> None:
    answer = _series(api, "clicks", "/signup", "2024-01-01T23:00:00Z", "2024-01-02T01:00:00Z")
    assert answer["boundary"] == {"clicks": None}
    assert _total(answer, "clicks") == 120 * 4
    assert not any(b["final"] for b in answer["series"][0]["buckets"])


def test_a_day_before_the_boundary_without_a_batch_version_has_no_events(api) -> None:
    answer = _series(api, "search_terms", "kafka", "2024-01-01T23:00:00Z", "2024-01-02T00:30:00Z")
    buckets = answer["series"][0]["buckets"]
    assert {b["searches"] for b in buckets[:60]} == {0}  # day 1: no version, speed ignored
    assert {b["searches"] for b in buckets[60:]} == {1}
    assert all(b["final"] for b in buckets)


def test_several_keys_give_one_series_each(api) -> None:
    answer = _series(
        api,
        "page_activity",
        ["/a", "/b", "/nowhere"],
        "2024-01-02T00:00:00Z",
        "2024-01-02T01:00:00Z",
    )
    totals = {
        s["key"]["path"]: sum(b["page_views"] for b in s["buckets"]) for s in answer["series"]
    }
    assert totals == {"/a": 330, "/b": 150, "/nowhere": 0}


def test_every_answer_says_how_fresh_the_speed_side_is(api) -> None:
    answer = _series(api, "page_activity", "/a", "2024-01-02T00:00:00Z", "2024-01-02T01:00:00Z")
    fresh = answer["freshness"]["page_activity"]
    assert fresh["newest_event_time"] == "2024-01-02T00:59:30Z"
    assert fresh["kafka_lag"] == 7 and fresh["lag_s"] > 0
    health = api.get("/health").json()
    assert health["boundary"]["page_activity"] == "2024-01-02T00:30:00Z"
    assert health["boundary"]["clicks"] is None


def _top(api, measure, start, end, n=10, view="page_activity", **params):
    answer = api.get(
        "/v1/top",
        params={"view": view, "measure": measure, "start": start, "end": end, "n": n} | params,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_top_n_ranks_on_values_merged_across_the_boundary(api) -> None:
    before = _top(api, "page_views", "2024-01-01T23:00:00Z", "2024-01-02T00:00:00Z")
    assert [(i["key"]["path"], i["value"]) for i in before["items"]] == [("/b", 180), ("/a", 60)]
    assert before["final"] is True
    after = _top(api, "page_views", "2024-01-02T00:30:00Z", "2024-01-02T01:00:00Z")
    assert [(i["key"]["path"], i["value"]) for i in after["items"]] == [("/a", 300), ("/b", 60)]
    across = _top(api, "page_views", "2024-01-02T00:00:00Z", "2024-01-02T01:00:00Z", n=1)
    assert [(i["key"]["path"], i["value"]) for i in across["items"]] == [("/a", 330)]
    assert across["final"] is False and across["boundary"]["page_activity"]


def test_slowest_pages_rank_by_the_merged_p95(api) -> None:
    last_minute = _top(api, "load_sketch", "2024-01-02T00:59:00Z", "2024-01-02T01:00:00Z", n=5)
    assert last_minute["rank"] == "p95"
    assert [(i["key"]["path"], i["value"]) for i in last_minute["items"]] == [
        ("/a", 1000.0),
        ("/b", 50.0),
    ]
    before = _top(api, "load_sketch", "2024-01-01T23:00:00Z", "2024-01-02T00:00:00Z", n=5)
    assert [(i["key"]["path"], i["value"], i["samples"]) for i in before["items"]] == [
        ("/b", 200.0, 60),
        ("/a", 100.0, 60),
    ]


def test_top_search_terms_skip_a_day_without_a_batch_version(api) -> None:
    answer = _top(
        api, "searches", "2024-01-01T23:00:00Z", "2024-01-02T01:00:00Z", view="search_terms"
    )
    assert answer["items"] == [{"key": {"query": "kafka"}, "value": 30 * 1 + 30 * 10}]


def test_reach_unions_visitors_across_the_boundary(api) -> None:
    page = api.get(
        "/v1/reach",
        params={
            "view": "page_activity",
            "key": "/a",
            "start": "2024-01-02T00:00:00Z",
            "end": "2024-01-02T01:00:00Z",
        },
    ).json()
    assert page["visitors"] == pytest.approx(30, abs=1)
    assert page["lower_bound"] <= 30 <= page["upper_bound"]
    assert page["final"] is False and page["source"] == "mixed"
    site = api.get(
        "/v1/reach",
        params={"start": "2024-01-01T23:00:00Z", "end": "2024-01-02T00:00:00Z"},
    ).json()
    assert site["key"] == {"site": "all"} and site["visitors"] == 1 and site["final"] is True


def test_a_new_version_of_a_day_replaces_the_old_one_and_the_boundary_only_matters(
    api, publish
) -> None:
    start, end = "2024-01-01T23:00:00Z", "2024-01-02T01:00:00Z"
    before = _series(api, "site_activity", None, start, end)
    assert _total(before, "events") == 90 * 1 + 30 * 10
    later = BOUNDARY + timedelta(minutes=15)
    publish("site_activity", [_site(m, 2) for m in MINUTES], later)
    after = _series(api, "site_activity", None, start, end)
    assert after["boundary"]["site_activity"] == "2024-01-02T00:45:00Z"
    assert _total(after, "events") == 105 * 2 + 15 * 10


def test_asking_for_some_measures_reads_and_returns_only_those(api) -> None:
    answer = _series(
        api,
        "page_activity",
        "/a",
        "2024-01-02T00:00:00Z",
        "2024-01-02T01:00:00Z",
        measure=["visitors", "page_views"],
    )
    bucket = answer["series"][0]["buckets"][0]
    assert set(bucket) == {"start", "final", "source", "available", "page_views", "visitors"}
    assert _total(answer) == 330
    bad = api.get("/v1/timeseries", params={"view": "page_activity", "key": "/a", "measure": "x"})
    assert bad.status_code == 400 and bad.json()["error"] == "unknown_measure"
