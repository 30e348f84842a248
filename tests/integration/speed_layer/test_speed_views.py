"""The speed layer on the real Kafka, Spark and Cassandra, against the simulator's truth."""

from __future__ import annotations

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from speed_layer.job import start_queries
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _drain(spark, settings) -> None:
    for query in start_queries(spark, settings, WEB_EVENTS, available_now=True):
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()


def test_views_equal_the_ground_truth(spark, speed_settings, read_view, views_match_truth):
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
    views_match_truth(truth, speed_settings)


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


def test_equal_ids_from_two_sources_count_as_two_events(spark, speed_settings, read_view):
    """Dedupe is per source: another site's equal messageId is another event, counted."""
    events = generate(SimulatorConfig(seed=19, events=400, duplicate_rate=0.1))
    produce_direct(events, speed_settings, source_id="site-a")
    produce_direct(events, speed_settings, source_id="site-b")
    _drain(spark, speed_settings)
    views = {k: r.page_views for k, r in read_view(speed_settings, "page_activity").items()}
    assert sum(views.values()) == 2 * sum(build_truth(events).page_views_per_minute.values())
