"""The ledger under interleaved steps, on real Kafka, Spark and Delta."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from pyspark.sql import functions as F

import batch_layer.gold as gold
from batch_layer.bronze import ingest_bronze
from batch_layer.ledger import Ledger
from batch_layer.quality import check_silver
from batch_layer.silver import build_silver
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS
from views import view

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]


def _ingest_day(spark, settings, day: date, run_id: str, seed: int):
    """Events of ``day`` through bronze, silver and the silver gate."""
    start = datetime(day.year, day.month, day.day, 12, tzinfo=UTC)
    produce_direct(generate(SimulatorConfig(seed=seed, events=30, rate=1, start=start)), settings)
    ingest_bronze(spark, settings, WEB_EVENTS)
    silver = build_silver(spark, settings, spec=WEB_EVENTS, run_id=run_id)
    check_silver(spark, settings, WEB_EVENTS, run_id=run_id)
    return silver


def test_a_silver_run_recorded_while_gold_runs_is_the_next_gold_runs_work(
    spark, lake_settings, monkeypatch
):
    day_one, day_two = date(2024, 3, 1), date(2024, 3, 2)
    first = _ingest_day(spark, lake_settings, day_one, "ingest-1", seed=1)
    assert first.dates == (day_one,)

    # The ingest DAG runs again while the views DAG's gold step is writing its views.
    real_properties = gold.ensure_table_properties
    during: list = []

    def ingest_meanwhile(*args, **kwargs):
        real_properties(*args, **kwargs)
        if not during:
            during.append(_ingest_day(spark, lake_settings, day_two, "ingest-2", seed=2))

    monkeypatch.setattr(gold, "ensure_table_properties", ingest_meanwhile)
    views_1 = gold.build_gold(spark, lake_settings, spec=WEB_EVENTS, run_id="views-1")
    monkeypatch.setattr(gold, "ensure_table_properties", real_properties)
    assert views_1.dates == (day_one,)
    assert during[0].dates == (day_two,)

    views_2 = gold.build_gold(spark, lake_settings, spec=WEB_EVENTS, run_id="views-2")

    assert views_2.dates == (day_two,)
    pages = spark.read.format("delta").load(gold.gold_path(lake_settings, view("page_activity")))
    assert {r.window_date for r in pages.select("window_date").distinct().collect()} == {
        day_one,
        day_two,
    }
    silver = spark.read.format("delta").load(first.path)
    day_two_views = silver.where((F.col("event_date") == day_two) & (F.col("type") == "page"))
    golden = pages.where(F.col("window_date") == day_two).agg(F.sum("page_views")).first()[0]
    assert (
        golden
        == day_two_views.where(
            F.coalesce("properties.path", "context.page.path").isNotNull()
        ).count()
    )
    # The first gold run's data reaches as far as the silver it read, not further.
    ledger = Ledger(spark, lake_settings, WEB_EVENTS).entries()
    as_of = {(e.step, e.run_id): e.as_of for e in ledger if e.step in ("silver", "gold")}
    assert as_of["gold", "views-1"] == as_of["silver", "ingest-1"] < as_of["silver", "ingest-2"]
    assert as_of["gold", "views-2"] == as_of["silver", "ingest-2"]
