"""A backfill of one day costs that day: with 12 days of bronze it reads only its candidates.

Twelve days of simulated traffic (duplicates, late and out-of-order events)
reach bronze in one run per day they were sent on, as a daily schedule leaves
it; silver then takes them in (one run). A backfill of one day in the middle must read only the
bronze files and records the bronze index places on that day, and rebuild it
exactly: the day's silver rows are the simulator's distinct valid events of
that day, and its gate passes.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from itertools import groupby

import pytest
from pyspark.sql import functions as F

from batch_layer.bronze import bronze_path, ingest_bronze
from batch_layer.quality import check_silver
from batch_layer.silver import build_silver
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

START = datetime(2024, 4, 1, tzinfo=UTC)
DAYS = 12


def test_a_backfill_of_one_day_among_twelve_reads_only_its_candidates(spark, lake_settings):
    events = generate(
        SimulatorConfig(
            seed=30,
            events=DAYS * 40,
            rate=40 / 86_400,  # forty events a day
            start=START,
            users=200,
            duplicate_rate=0.05,
            late_rate=0.05,
            late_by_s=3 * 3600,
            out_of_order_rate=0.1,
            invalid_rate=0.02,
        )
    )
    truth = build_truth(events)
    files_of_run: dict[date, int] = {}  # the bronze files each day's run added
    bronze = bronze_path(lake_settings, WEB_EVENTS)
    for sent_on, sent in groupby(events, key=lambda e: e.sent_at.date()):
        produce_direct(list(sent), lake_settings)
        ingest_bronze(spark, lake_settings, WEB_EVENTS)
        files = len(spark.read.format("delta").load(bronze).inputFiles())
        files_of_run[sent_on] = files - sum(files_of_run.values())
    first = build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="daily")
    assert check_silver(spark, lake_settings, WEB_EVENTS, run_id="daily").passed
    assert first.events == truth.valid_events
    files_in_bronze = first.bronze_files[1]
    assert files_in_bronze >= DAYS

    day = (START + timedelta(days=DAYS // 2)).date()
    expected = _events_of(events, day)
    backfill = build_silver(spark, lake_settings, [day], spec=WEB_EVENTS, run_id="backfill")

    # It read the files and records of the runs that took that day's events in (its late
    # ones arrive in later runs), not twelve days' worth. Kafka keeps each partition in send
    # order, so the day's offset ranges hold at most the records sent between its first and
    # last one.
    sent = [i for i, e in enumerate(events) if e.time.date() == day]
    first_run, last_run = events[sent[0]].sent_at.date(), events[sent[-1]].sent_at.date()
    runs_files = sum(n for run, n in files_of_run.items() if first_run <= run <= last_run)
    files_read, files_total = backfill.bronze_files
    assert files_total == files_in_bronze == sum(files_of_run.values())
    assert 0 < files_read <= runs_files < files_total, (backfill, files_of_run)
    between = sent[-1] - sent[0] + 1
    assert len(sent) <= backfill.parsed <= between < len(events), backfill
    # ... and rebuilt it exactly.
    assert backfill.dates == (day,)
    silver = spark.read.format("delta").load(backfill.path)
    rebuilt = silver.where(F.col("event_date") == day)
    assert sorted(r.event_id for r in rebuilt.select("event_id").collect()) == sorted(expected)
    in_day = sum(n for minute, n in truth.events_per_minute.items() if minute[:10] == str(day))
    assert backfill.events == len(expected) == in_day
    assert silver.count() == truth.valid_events  # the other days are untouched
    report = check_silver(spark, lake_settings, WEB_EVENTS, run_id="backfill")
    assert report.passed, report.failures()
    ours = [r for r in report.reconciliations if r["name"].startswith("silver run backfill")]
    assert len(ours) == 4 and all(r["ok"] for r in ours), ours


def _events_of(events: list, day: date) -> list[str]:
    """The message ids of the distinct valid events whose time falls on ``day``."""
    return sorted({e.payload["messageId"] for e in events if not e.defect and e.time.date() == day})
