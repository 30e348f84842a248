"""The gates on real Kafka -> bronze -> silver -> gold.

The silver gate agrees with silver's dedupe; a failing gate's report is the
one Great Expectations alone gives on the same Delta rows (statistics, each
failed expectation's unexpected count, percent and values), and its
reconciliations are the counts Spark gives one by one.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from batch_layer.bronze import ingest_bronze
from batch_layer.gold import build_gold
from batch_layer.ledger import Entry, Ledger
from batch_layer.quality import (
    QualityGateFailed,
    check_gold,
    check_silver,
    suite_result,
    view_suite,
)
from batch_layer.silver import SILVER_COLUMNS, build_silver, silver_path
from data_contracts import load_contract
from data_contracts.derive import expectation_suite, validate_with_gx
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from layout.lake import gold_path
from tests.support.web import WEB_EVENTS
from views import view
from views.input import PAYLOAD

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


def _report(failed: QualityGateFailed) -> dict:
    path = str(failed).split("report: ")[1].split("\n")[0]
    with open(path.replace(".md", ".json")) as report:
        return json.load(report)


def _as_json(value: object) -> object:
    return json.loads(json.dumps(value, default=str))


def test_a_failing_gate_reports_what_gx_alone_reports(spark, lake_settings):
    events = generate(
        SimulatorConfig(seed=11, events=300, start=datetime(2024, 3, 1, 9, tzinfo=UTC))
    )
    produce_direct(events, lake_settings)
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    silver_run = build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="hourly")
    passed = check_silver(spark, lake_settings, WEB_EVENTS, run_id="hourly")
    assert passed.passed and passed.suites["silver"]["failures"] == []
    build_gold(spark, lake_settings, spec=WEB_EVENTS, run_id="hourly")
    day = silver_run.dates[0]

    # Gold: six copies of a day's page rows with a negative count (repeated keys too).
    spec = view("page_activity")
    path = gold_path(lake_settings, spec)
    gold = spark.read.format("delta").load(path)
    negative = F.lit(-1).cast(gold.schema["page_views"].dataType)
    bad = gold.where(F.col("window_date") == day).limit(6).withColumn("page_views", negative)
    bad.write.format("delta").mode("append").save(path)
    with pytest.raises(QualityGateFailed) as failed:
        check_gold(spark, lake_settings, WEB_EVENTS, run_id="hourly")
    report = _report(failed.value)
    days = [date.fromisoformat(d) for d in report["days"]]
    for name in _gold_views(report):
        table = spark.read.format("delta").load(gold_path(lake_settings, view(name)))
        table = table.where(F.col("window_date").isin(days))
        alone = suite_result(validate_with_gx(table, view_suite(view(name))))
        assert report["suites"][f"gold/{name}"] == _as_json(alone), name
    failures = report["suites"]["gold/page_activity"]["failures"]
    assert {f["rule"] for f in failures} == {"one row", "not negative"}
    assert (
        next(f for f in failures if f["rule"] == "not negative")["observed"]["examples"] == [-1] * 5
    )
    silver = spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS))
    silver = silver.where(F.col("event_date").isin(days))
    for rule, figures in zip(WEB_EVENTS.reconcile, report["reconciliations"], strict=True):
        table = spark.read.format("delta").load(gold_path(lake_settings, view(rule.view)))
        table = table.where(F.col("window_date").isin(days))
        total = table.agg(F.sum(rule.measure)).collect()[0][0] or 0
        expected = silver.where(F.expr(rule.silver_where)).count()
        assert (figures["expected"], figures["actual"]) == (expected, total)

    # Silver: seven copies of events with a type outside the contract's (repeated keys too).
    rows = silver.where(F.col("event_date") == day).limit(7).withColumn("type", F.lit("teleport"))
    rows.write.format("delta").mode("append").save(silver_path(lake_settings, WEB_EVENTS))
    ledger = Ledger(spark, lake_settings, WEB_EVENTS)
    ledger.append(Entry("silver", "bad-1", datetime.now(UTC), (day,), datetime.now(UTC)))
    with pytest.raises(QualityGateFailed) as failed:
        check_silver(spark, lake_settings, WEB_EVENTS, run_id="bad-1")
    report = _report(failed.value)
    contract = load_contract(WEB_EVENTS.contract, WEB_EVENTS.contract_major)
    suite = expectation_suite(contract, extra_columns=SILVER_COLUMNS)
    table = spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS))
    table = table.where(F.col("event_date").isin([day]))
    typed = table.select(*[c for c in table.columns if c != PAYLOAD])
    assert report["suites"]["silver"] == _as_json(suite_result(validate_with_gx(typed, suite)))
    failures = report["suites"]["silver"]["failures"]
    assert {f["rule"] for f in failures} == {"enum", "primaryKey"}
    enum = next(f for f in failures if f["rule"] == "enum")["observed"]
    assert (enum["unexpected_count"], enum["examples"]) == (7, ["teleport"] * 5)


def _gold_views(report: dict) -> list[str]:
    return [name.split("/", 1)[1] for name in report["suites"]]


def test_the_silver_gate_takes_a_runs_figures_from_its_write_and_finds_a_lost_row(
    spark, lake_settings
):
    """A run's figures observed while silver wrote agree with the same figures counted again
    from its staging folder; a silver row or a reject lost after the write fails the gate."""
    from delta.tables import DeltaTable

    from batch_layer.run_figures import counted_figures, silver_run_figures
    from batch_layer.silver import rejects_path
    from core.suppressions import read_suppressions

    events = generate(
        SimulatorConfig(
            seed=17, events=200, duplicate_rate=0.1, start=datetime(2024, 3, 1, 9, tzinfo=UTC)
        )
    )
    produce_direct(events, lake_settings)
    producer = Producer(lake_settings.kafka.client_config())
    for path in ("/x", "/y"):  # no event id, no timestamp: two rejects
        bad = {"type": "page", "userId": "u-bad", "properties": {"path": path}}
        producer.produce(lake_settings.kafka.events_topic, value=json.dumps(bad).encode())
    assert producer.flush(30) == 0
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    run = build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="hourly")
    assert run.duplicates > 0 and run.rejects == 2

    (entry,) = [e for e in Ledger(spark, lake_settings, WEB_EVENTS).entries() if e.step == "silver"]
    suppressions = read_suppressions(lake_settings.kafka)
    observed = silver_run_figures(spark, lake_settings, WEB_EVENTS, entry, suppressions)
    counted = counted_figures(spark, lake_settings, WEB_EVENTS, entry, frozenset())
    assert observed["way"] == "observed" and counted["way"] == "counted"
    assert {k: v for k, v in observed.items() if k != "way"} == {
        k: v for k, v in counted.items() if k != "way"
    }
    assert observed["held"] == run.events and observed["copies"] == run.duplicates
    assert observed["orphans"] == 0 and observed["recorded"] == 2

    # One of the run's silver rows and one of its rejects lost after the write.
    for path in (silver_path(lake_settings, WEB_EVENTS), rejects_path(lake_settings, WEB_EVENTS)):
        table = DeltaTable.forPath(spark, path)
        lost = table.toDF().select("partition", "offset").orderBy("partition", "offset").first()
        table.delete((F.col("partition") == lost.partition) & (F.col("offset") == lost.offset))
    with pytest.raises(QualityGateFailed) as failed:
        check_silver(spark, lake_settings, WEB_EVENTS, run_id="hourly")
    reconciled = _report(failed.value)["reconciliations"]
    found = {r["name"].split(": ", 1)[1]: r for r in reconciled if ": " in r["name"]}
    held = found["its events = silver rows holding them + copies dropped"]
    assert (held["expected"], held["actual"], held["ok"]) == (
        run.events + run.duplicates,
        run.events + run.duplicates - 1,
        False,
    )
    recorded = found["its rejects in the rejects table"]
    assert (recorded["expected"], recorded["actual"], recorded["ok"]) == (2, 1, False)
