"""The speed layer on the real Kafka, Spark and Cassandra, against the simulator's truth."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from speed_layer.job import start_queries

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def _drain(spark, settings) -> None:
    for query in start_queries(spark, settings, available_now=True):
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()


def _hll_estimate(blob: bytes) -> float:
    from datasketches import hll_sketch

    return hll_sketch.deserialize(bytes(blob)).get_estimate()


def assert_views_match_truth(truth, read_view, settings) -> None:
    pages = read_view(settings, "page_activity")
    got = defaultdict(dict)
    for (start, path), row in pages.items():
        got[_minute(start)][path] = row.page_views
    assert dict(got) == truth.page_views

    site = read_view(settings, "site_activity")
    assert {_minute(s): r.events for (s, _), r in site.items()} == truth.events_per_minute
    site_page_views = {_minute(s): r.page_views for (s, _), r in site.items() if r.page_views}
    assert site_page_views == {m: n for m, n in truth.page_views_per_minute.items() if n}

    for view, expected, measure in [
        ("search_terms", truth.searches, "searches"),
        ("clicks", truth.clicks, "clicks"),
    ]:
        got = defaultdict(dict)
        for (start, key), row in read_view(settings, view).items():
            got[_minute(start)][key] = getattr(row, measure)
        assert dict(got) == expected, view

    # Load times: count, sum and max per page over the run.
    load = defaultdict(lambda: [0, 0.0, 0.0])
    for (_, path), row in pages.items():
        if row.load_count:
            load[path][0] += row.load_count
            load[path][1] += row.load_sum
            load[path][2] = max(load[path][2], row.load_max)
    for path, stats in truth.load_time.items():
        assert load[path][0] == stats.count
        assert load[path][1] == pytest.approx(stats.sum_ms)
        assert load[path][2] == pytest.approx(stats.max_ms)

    # Distinct visitors: HLL sketches within their error bound (lgK 12: ~1.6% RSE; 3 sigma).
    for (start, _), row in site.items():
        expected = truth.visitors_per_minute[_minute(start)]
        assert abs(_hll_estimate(row.visitors) - expected) <= max(2, 0.05 * expected)


def test_views_equal_the_ground_truth(spark, speed_settings, read_view):
    events = generate(
        SimulatorConfig(
            seed=5,
            events=3000,
            duplicate_rate=0.05,
            out_of_order_rate=0.3,
            skewed_client_rate=0.2,
            invalid_rate=0.03,
        )
    )
    truth = build_truth(events)
    counts = produce_direct(events, speed_settings)
    assert counts["accepted"] == truth.valid_events + sum(
        1 for e in events if e.duplicate and not e.defect
    )
    _drain(spark, speed_settings)
    assert_views_match_truth(truth, read_view, speed_settings)


def test_a_replayed_run_rewrites_the_same_values(spark, speed_settings, read_view, tmp_path):
    """Reprocessing the log from scratch (a new checkpoint) upserts identical rows."""
    events = generate(SimulatorConfig(seed=9, events=800, duplicate_rate=0.1))
    produce_direct(events, speed_settings)
    _drain(spark, speed_settings)
    first = {k: r.page_views for k, r in read_view(speed_settings, "page_activity").items()}
    replay = speed_settings.model_copy(
        update={"speed": speed_settings.speed.model_copy(update={"checkpoint_name": "replay"})}
    )
    _drain(spark, replay)
    again = {k: r.page_views for k, r in read_view(speed_settings, "page_activity").items()}
    assert again == first  # absolute upserts: no double counting
    assert sum(first.values()) == sum(build_truth(events).page_views_per_minute.values())
