"""Gold: the shared views, computed exactly from silver, one Delta table per view.

The same view functions as the speed layer (:mod:`views`), applied to the
complete, deduplicated events of whole days, so the answers are exact: late
events are in their true windows. As in the speed layer, each person's id (the
pipeline's ``identity`` fields) is replaced by its keyed digest before the views
are built (:func:`views.digest.pseudonymise`), so both layers' sketches hold the
same digests. Each view's table is partitioned by
``window_date`` and a run rewrites exactly the days it covers
(``replaceWhere``): reprocessing a day rewrites that day and nothing else.

Without explicit dates a run covers the days of the silver runs no gold run
consumed yet (from the pipeline ledger, by entry id), and only once the
latest silver quality gate passed on exactly those runs; it records their
ids, so a silver run that lands while gold is running stays pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from batch_layer.ledger import Entry, Ledger, covers, pending
from batch_layer.silver import days_predicate, silver_path
from batch_layer.tables import creation_options, ensure_table_properties
from core.log import get_logger, log_event
from core.settings import Settings
from layout.lake import gold_path
from pipelines import PipelineSpec
from views import ViewSpec
from views.digest import pseudonymise
from views.input import PAYLOAD

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["GateNotPassed", "GoldRun", "build_gold", "gold_path"]

_log = get_logger(__name__)


class GateNotPassed(RuntimeError):
    """The step before has not passed its quality gate: nothing downstream may run."""


@dataclass(frozen=True)
class GoldRun:
    dates: tuple[date, ...]
    rows: dict[str, int]
    """Rows per view in the rewritten days."""


_CONSUMER = {"silver": "gold", "gold": "publish"}
"""The step that consumes each gated step's work."""


def require_gate(entries: list[Entry], stage: str, after_step: str) -> None:
    """Raise unless the latest ``stage`` gate checked, and passed, every pending
    ``after_step`` entry (those its consumer has not taken yet)."""
    gates = sorted(
        (e for e in entries if e.step == "gate" and e.detail.get("stage") == stage),
        key=lambda e: e.recorded_at,
    )
    gate = gates[-1] if gates else None
    work = pending(entries, after_step, _CONSUMER[after_step])
    if any(gate is None or not covers(gate, e) for e in work):
        raise GateNotPassed(
            f"The {stage} quality gate has not run since the last {after_step} run; "
            f"run the check_{stage} step first."
        )
    if gate is not None and not gate.passed:
        raise GateNotPassed(
            f"The {stage} quality gate failed (run {gate.run_id}); see {gate.detail.get('report')}."
        )


def build_gold(
    spark: SparkSession,
    settings: Settings,
    dates: list[date] | None = None,
    views: tuple[ViewSpec, ...] | None = None,
    *,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> GoldRun:
    """Rewrite every view's gold partitions for ``dates`` (default: silver's pending days).

    Each view's rows written are counted while they are written (Spark's ``Observation``),
    not read back from the table's history."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    ledger = Ledger(spark, settings, spec)
    entries = ledger.entries()
    work: list[Entry] = []
    if dates is None:
        work = pending(entries, "silver", "gold")
        dates = sorted({day for e in work for day in e.days})
        if dates:
            require_gate(entries, "silver", "silver")
    as_of = max((e.as_of for e in entries if e.step == "silver" and e.as_of), default=None)
    days = tuple(sorted(set(dates)))
    written: dict[str, int] = {}
    if days:
        key = settings.views.identity_key_for(settings.environment)
        silver = spark.read.format("delta").load(silver_path(settings, spec))
        # Read once for every view: the days' typed columns, ids digested, kept while the
        # views are built.
        days_events = silver.where(F.col("event_date").isin(list(days))).drop(PAYLOAD)
        events = pseudonymise(days_events, spec.identity, key).persist()
        predicate = days_predicate("window_date", days)
        try:
            for view in views or spec.view_specs:
                path = gold_path(settings, view)
                rows = view.build(events).withColumn("window_date", F.to_date("window_start"))
                counted = Observation()
                (
                    rows.observe(counted, F.count(F.lit(1)).alias("rows"))
                    .write.format("delta")
                    .mode("overwrite")
                    .partitionBy("window_date")
                    .option("replaceWhere", predicate)
                    .option("userMetadata", run_id)
                    .options(**creation_options(settings))
                    .save(path)
                )
                ensure_table_properties(spark, settings, path)
                written[view.name] = int(counted.get["rows"])
        finally:
            events.unpersist()
    consumed = tuple(e.entry_id for e in work)
    ledger.append(
        Entry("gold", run_id, datetime.now(UTC), days, as_of, True, {"rows": written}, consumed)
    )
    log_event(_log, "gold.built", run_id=run_id, dates=[d.isoformat() for d in days], rows=written)
    return GoldRun(days, written)
