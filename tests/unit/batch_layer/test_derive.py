"""A derived pipeline's step on Spark and Delta: the days its inputs changed, gated, written.

Silver and the ledger entries of its runs are written as silver and its gate write them
(no Kafka: the step reads silver and the ledgers only); ``derive`` then runs over them as
the ``web_sessions_build`` DAG's task runs it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import pytest
from pyspark.sql import functions as F

from batch_layer.derive import build_derived
from batch_layer.ledger import Entry, Ledger
from batch_layer.quality import QualityGateFailed
from batch_layer.silver import silver_path
from core.settings import BatchSettings, LakeSettings
from derived import web_sessions
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.session_truth import build_session_truth
from layout.lake import derived_path, table_version
from pipelines import derived_pipeline, pipeline
from pipelines.simulators.order_attribution import build_attribution_truth
from tests.support.silver import web_silver_rows

pytestmark = pytest.mark.slow

WEB = pipeline("web_events")
SESSIONS = derived_pipeline("web_sessions")
DAY1, DAY2 = date(2024, 3, 1), date(2024, 3, 2)


@pytest.fixture
def lake(settings, tmp_path):
    return settings.model_copy(
        update={
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "batch": BatchSettings(reports_dir=tmp_path / "quality"),
        }
    )


def _silver_run(spark, settings, events, *, gated=True, first_offset=0) -> Entry:
    """Append ``events``' silver rows and the ledger entries of a silver run (and its gate)."""
    rows = web_silver_rows(spark, [(e.payload, e.sent_at) for e in events], first_offset)
    rows.write.format("delta").mode("append").partitionBy("event_date").save(
        silver_path(settings, WEB)
    )
    days = tuple(sorted({e.time.date() for e in events if e.defect is None}))
    ledger = Ledger(spark, settings, WEB)
    run = Entry("silver", f"run-{first_offset}", datetime.now(UTC), days)
    ledger.append(run)
    if gated:
        detail = {"stage": "silver"}
        gate = Entry("gate", run.run_id, datetime.now(UTC), days, passed=True, detail=detail)
        ledger.append(replace(gate, consumed=(run.entry_id,)))
    return run


def _table(spark, settings):
    rows = spark.read.format("delta").load(derived_path(settings, SESSIONS.name)).collect()
    return sorted(
        ({k: v.astimezone(UTC) if isinstance(v, datetime) else v for k, v in r.asDict().items()}
         for r in rows),
        key=lambda r: r["session_id"],
    )  # fmt: skip


def test_the_days_its_input_published_are_built_once_and_a_republished_day_alone(spark, lake):
    start = datetime(2024, 3, 1, 22, 0, tzinfo=UTC)
    events = generate(SimulatorConfig(seed=5, events=1500, rate=0.15, users=80, start=start))
    night, late = events[:1200], events[1200:]
    first = _silver_run(spark, lake, night)

    run = build_derived(spark, lake, SESSIONS, "r1")
    assert (run.days, run.consumed) == ((DAY1, DAY2), (first.entry_id,))
    assert _table(spark, lake) == build_session_truth(night)
    assert "derived.md" in run.report_path

    again = build_derived(spark, lake, SESSIONS, "r2")
    assert (again.days, again.rows) == ((), 0), "nothing changed: nothing rebuilt"

    ungated = _silver_run(spark, lake, late, gated=False, first_offset=10_000)
    assert build_derived(spark, lake, SESSIONS, "r3").days == (), "its gate has not passed"
    Ledger(spark, lake, WEB).append(
        Entry("gate", "r3", datetime.now(UTC), ungated.days, passed=True,
              detail={"stage": "silver"}, consumed=(ungated.entry_id,))
    )  # fmt: skip
    version = table_version(spark, derived_path(lake, SESSIONS.name))
    rebuilt = build_derived(spark, lake, SESSIONS, "r4")
    assert rebuilt.days == (DAY2,) and rebuilt.consumed == (ungated.entry_id,)
    assert _table(spark, lake) == build_session_truth(events)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{derived_path(lake, SESSIONS.name)}`")
    last = history.where(F.col("version") == version[0] + 1).first()
    assert last.operationParameters["predicate"] == "session_date IN (DATE'2024-03-02')"


def test_rows_that_fail_the_contract_are_not_written_and_their_days_stay_pending(
    spark, lake, monkeypatch
):
    start = datetime(2024, 3, 1, 23, 30, tzinfo=UTC)
    events = generate(SimulatorConfig(seed=6, events=300, rate=0.1, users=30, start=start))
    _silver_run(spark, lake, events)
    built = web_sessions.build
    monkeypatch.setattr(web_sessions, "build", lambda inputs: built(inputs).unionAll(built(inputs)))
    with pytest.raises(
        QualityGateFailed, match=r"(?s)nothing written;.*session_id primaryKey.*to_be_unique"
    ):
        build_derived(spark, lake, SESSIONS, "twice")
    assert table_version(spark, derived_path(lake, SESSIONS.name)) is None
    verdict = Ledger(spark, lake, SESSIONS).last("derived")
    assert (verdict.passed, verdict.consumed) == (False, ())

    monkeypatch.setattr(web_sessions, "build", lambda inputs: built(inputs).drop("device"))
    with pytest.raises(QualityGateFailed, match=r"builds columns .* but its contract"):
        build_derived(spark, lake, SESSIONS, "narrow")

    monkeypatch.setattr(web_sessions, "build", built)
    assert build_derived(spark, lake, SESSIONS, "fixed").days == (DAY1, DAY2)
    assert _table(spark, lake) == build_session_truth(events)


def test_an_input_not_written_yet_is_read_as_no_rows(spark, lake):
    """The shop's silver does not exist yet: the attribution of the sessions' days (and the
    week they reach) is built with no order, each campaign's visits counted."""
    start = datetime(2024, 3, 1, 20, 0, tzinfo=UTC)
    events = generate(SimulatorConfig(seed=8, events=400, rate=0.1, users=40, start=start))
    _silver_run(spark, lake, events)
    build_derived(spark, lake, SESSIONS, "sessions")
    attribution = derived_pipeline("order_attribution")
    run = build_derived(spark, lake, attribution, "no-orders")
    assert run.days == tuple(date(2024, 3, d) for d in range(1, 9))
    rows = spark.read.format("delta").load(derived_path(lake, attribution.name)).collect()
    truth = build_attribution_truth(build_session_truth(events), [])
    assert sorted(tuple(r) for r in rows) == sorted(tuple(t.values()) for t in truth)
    assert rows and all(r.orders == 0 and r.currency is None for r in rows)
