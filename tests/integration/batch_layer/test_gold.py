"""Gold: the shared views over silver equal the simulator's truth, late events included."""

from __future__ import annotations

from collections import defaultdict

import pytest

from batch_layer.bronze import ingest_bronze
from batch_layer.gold import build_gold, gold_path
from batch_layer.silver import build_silver
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS
from views import view

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_gold_views_are_exact_and_days_rewrite_alone(spark, lake_settings):
    settings = lake_settings
    events = generate(
        SimulatorConfig(
            seed=12,
            events=1500,
            duplicate_rate=0.05,
            late_rate=0.1,
            late_by_s=3600,
            invalid_rate=0.02,
        )
    )
    truth = build_truth(events)
    produce_direct(events, settings)
    ingest_bronze(spark, settings, WEB_EVENTS)
    silver = build_silver(spark, settings, spec=WEB_EVENTS)

    written = build_gold(spark, settings, list(silver.dates), spec=WEB_EVENTS)
    assert set(written.rows) == {"page_activity", "site_activity", "search_terms", "clicks"}

    pages = spark.read.format("delta").load(gold_path(settings, view("page_activity")))
    got = defaultdict(dict)
    for row in pages.collect():
        got[row.window_start.strftime("%Y-%m-%dT%H:%M:00Z")][row.path] = row.page_views
    assert dict(got) == truth.page_views  # late events (an hour late) in their true windows

    searches = spark.read.format("delta").load(gold_path(settings, view("search_terms")))
    got = defaultdict(dict)
    for row in searches.collect():
        got[row.window_start.strftime("%Y-%m-%dT%H:%M:00Z")][row.query] = row.searches
    assert dict(got) == truth.searches

    # A rerun of the same day rewrites it with identical rows.
    before = sorted(map(tuple, pages.select("window_start", "path", "page_views").collect()))
    build_gold(spark, settings, list(silver.dates), spec=WEB_EVENTS)
    after = spark.read.format("delta").load(gold_path(settings, view("page_activity")))
    assert (
        sorted(map(tuple, after.select("window_start", "path", "page_views").collect())) == before
    )
