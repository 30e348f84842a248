"""The whole batch pipeline on real Kafka, Spark, Delta and Cassandra.

bronze -> silver -> gate -> gold -> gate -> publish, run step by step as the
DAG tasks run them: gold equals the ground truth for every closed window,
late events included; the published batch tables equal gold; reruns and
backfills change nothing; a contract violation in silver stops the run at the
gate with a report, and the boundary stays where it was.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from pyspark.sql import functions as F

from batch_layer.gold import GateNotPassed
from batch_layer.ledger import Entry, Ledger
from batch_layer.publish import boundary_for
from batch_layer.quality import QualityGateFailed, check_silver
from batch_layer.silver import silver_path
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from layout import read_boundaries
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_pipeline_is_exact_idempotent_and_gated(
    spark,
    pipeline_settings,
    run_pipeline,
    cassandra_session,
    gold_page_views,
    published_view,
):
    settings = pipeline_settings
    keyspace = settings.cassandra.keyspace
    events = generate(
        SimulatorConfig(
            seed=21,
            events=2000,
            rate=0.05,  # about eleven hours of traffic, across a day boundary
            start=datetime(2024, 3, 1, 18, tzinfo=UTC),
            duplicate_rate=0.05,
            late_rate=0.1,
            late_by_s=5400,
            out_of_order_rate=0.1,
            invalid_rate=0.02,
        )
    )
    truth = build_truth(events)
    produce_direct(events, settings)

    started = datetime.now(UTC)
    first = run_pipeline(settings, "run-1")
    assert first["bronze"].rows > 0
    assert len(first["silver"].dates) >= 2
    assert first["check_silver"].passed and first["check_gold"].passed

    # Gold is exact for every window (late events in their true minute), and so is
    # what publish loaded into Cassandra for serving.
    assert gold_page_views(settings) == truth.page_views
    assert published_view(keyspace) == truth.page_views
    boundaries = read_boundaries(settings.cassandra, WEB_EVENTS.views)
    expected = boundary_for(started, settings.batch.lateness_s, settings.batch.period)
    for name in WEB_EVENTS.views:
        boundary = boundaries[name].at
        assert expected <= boundary <= boundary_for(datetime.now(UTC), 60, "hour")

    # The same run again: bronze reads nothing twice, nothing is pending, nothing changes.
    bronze = spark.read.format("delta").load(first["bronze"].path)
    offsets = bronze.select("partition", "offset")
    assert offsets.distinct().count() == offsets.count() == first["bronze"].rows
    again = run_pipeline(settings, "run-1")
    assert again["bronze"].skipped and again["silver"].dates == () and again["publish"].days == ()
    assert spark.read.format("delta").load(first["bronze"].path).count() == first["bronze"].rows
    assert gold_page_views(settings) == truth.page_views

    # A backfill of processed days rewrites them with the same values under a new version.
    versions_before = {
        (r.view_name, r.day): r.version
        for r in cassandra_session.execute(f"SELECT * FROM {keyspace}.batch_days")
    }
    backfill = run_pipeline(settings, "backfill-1", dates=list(first["silver"].dates))
    assert backfill["bronze"].skipped
    assert backfill["publish"].days == first["silver"].dates
    assert gold_page_views(settings) == truth.page_views
    assert published_view(keyspace) == truth.page_views
    versions_after = {
        (r.view_name, r.day): r.version
        for r in cassandra_session.execute(f"SELECT * FROM {keyspace}.batch_days")
    }
    assert all(versions_after[d] > versions_before[d] for d in versions_before)
    superseded = cassandra_session.execute(f"SELECT * FROM {keyspace}.batch_superseded").all()
    assert len(superseded) == len(versions_before)

    # A contract violation injected into silver: the gate fails and names it.
    boundary_before = read_boundaries(settings.cassandra, ["page_activity"])["page_activity"]
    silver = spark.read.format("delta").load(silver_path(settings, WEB_EVENTS))
    day = first["silver"].dates[0]
    bad = silver.where(silver.event_date == day).limit(3).withColumn("type", F.lit("teleport"))
    bad.write.format("delta").mode("append").save(silver_path(settings, WEB_EVENTS))
    ledger = Ledger(spark, settings, WEB_EVENTS)
    ledger.append(Entry("silver", "bad-1", datetime.now(UTC), (day,), datetime.now(UTC)))
    with pytest.raises(QualityGateFailed) as failed:
        check_silver(spark, settings, WEB_EVENTS, "bad-1")
    message = str(failed.value)
    assert "type" in message and "enum" in message
    report_path = message.split("report: ")[1].split("\n")[0]
    report = json.loads(open(report_path.replace(".md", ".json")).read())  # noqa: SIM115
    assert not report["passed"]
    assert any(
        f["field"] == "type" and f["rule"] == "enum" for f in report["suites"]["silver"]["failures"]
    )
    # Nothing downstream runs past the failed gate; the boundary does not move.
    from batch_layer.gold import build_gold
    from batch_layer.publish import publish

    with pytest.raises(GateNotPassed):
        build_gold(spark, settings, spec=WEB_EVENTS, run_id="bad-1")
    assert publish(spark, settings, WEB_EVENTS, "bad-1").days == ()
    after = read_boundaries(settings.cassandra, ["page_activity"])["page_activity"]
    assert after.at == boundary_before.at
