"""The silver gate on real Kafka -> bronze -> silver: it agrees with silver's dedupe."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from pyspark.sql import functions as F

from batch_layer.bronze import ingest_bronze
from batch_layer.gold import build_gold
from batch_layer.pipelines import WEB_EVENTS
from batch_layer.quality import check_silver
from batch_layer.silver import build_silver
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_duplicate_across_midnight_passes_a_one_day_backfill(spark, lake_settings):
    """A client retry received 20 s later: its corrected time falls after midnight.
    Silver keeps the first copy on day one; a backfill of day two alone must pass."""
    (late_evening,) = generate(
        SimulatorConfig(seed=3, events=1, start=datetime(2024, 3, 1, 23, 59, 50, tzinfo=UTC))
    )
    retry = replace(late_evening, sent_at=late_evening.sent_at + timedelta(seconds=20))
    morning = generate(
        SimulatorConfig(seed=4, events=2, start=datetime(2024, 3, 2, 0, 5, tzinfo=UTC))
    )
    produce_direct([late_evening, retry, *morning], lake_settings)
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    day_one, day_two = date(2024, 3, 1), date(2024, 3, 2)

    first = build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="hourly")
    assert (first.dates, first.events, first.duplicates) == ((day_one, day_two), 3, 1)
    assert check_silver(spark, lake_settings, WEB_EVENTS, run_id="hourly").passed
    build_gold(spark, lake_settings, spec=WEB_EVENTS, run_id="hourly")

    backfill = build_silver(spark, lake_settings, [day_two], spec=WEB_EVENTS, run_id="backfill")
    assert backfill.dates == (day_two,)
    report = check_silver(spark, lake_settings, WEB_EVENTS, run_id="backfill")
    assert report.passed, report.failures()
    assert report.days == ["2024-03-02"]
    checks = {r["name"].split(": ", 1)[1]: r for r in report.reconciliations if ": " in r["name"]}
    # Day two's candidates: the retry and the two morning events; the retry is a copy of
    # the evening event silver holds on day one, so two rows and one copy.
    assert checks["its events = silver rows holding them + copies dropped"]["actual"] == 3
    assert checks["dropped copies without their event in silver"]["actual"] == 0
    assert backfill.events == 2 and backfill.duplicates == 1

    silver = spark.read.format("delta").load(first.path)
    copies = silver.where(F.col("event_id") == late_evening.payload["messageId"]).collect()
    assert [row.event_date for row in copies] == [day_one]
