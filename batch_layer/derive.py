"""A derived pipeline's table, rebuilt by day from its inputs and gated before it is written.

``python -m batch_layer derive --pipeline NAME`` (the ``NAME_build`` DAG's task):

1. **Which days.** The days its inputs changed that no run of this pipeline
   took yet: an input pipeline's silver runs whose silver gate passed, a
   derived input's passed runs (both found in the inputs' ledgers, by entry
   id, as gold finds silver's), each reaching ``Input.reach_days`` further
   (:func:`pipelines.derived.output_days`). A forget's silver entry is such
   a run, so the days that held a forgotten person are rebuilt without them.
   ``--dates`` rebuilds the days given (a backfill).
2. **Build.** Each input is read on the days those output days read
   (:func:`pipelines.derived.input_days`), narrowed to the columns the
   transformation declares (``READS``), and handed to its ``build``; the
   rows of the rebuilt days are kept.
3. **Gate.** Before anything is written, the rows must have exactly the
   contract's columns and types, and pass the contract's suite
   (:func:`data_contracts.derive.expectation_suite`: required fields, ranges,
   accepted values, the key unique), judged in one Spark query over the rows
   as built. A report is written as the other gates write theirs
   (``<reports_dir>/<name>/<run>/derived.md``). A failed gate writes nothing
   and records its verdict: the table keeps its last good days, readers see
   no half-checked day, and the days stay pending for the next run.
4. **Write.** The days' partitions are replaced in one commit
   (``replaceWhere``), so a rerun writes the same rows; the ledger records the
   run with the input runs it took.

Nothing here names an input: what a derived pipeline reads, and how, is its
declaration (:class:`pipelines.DerivedSpec`) and its module of :mod:`derived`.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from batch_layer.ledger import Entry, Ledger, covers
from batch_layer.quality import GateReport, QualityGateFailed, suite_result
from batch_layer.silver import SILVER_COLUMNS, days_predicate, silver_path
from batch_layer.tables import creation_options, ensure_table_properties
from core.log import get_logger, log_event
from core.settings import Settings
from derived.inputs import project
from layout.lake import derived_path, table_version
from pipelines import DerivedSpec, PipelineSpec, derived_pipeline, pipeline
from pipelines.derived import input_days, output_days

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DerivedRun", "build_derived", "changed_days"]

_log = get_logger(__name__)
STAGE = "derived"


@dataclass(frozen=True)
class DerivedRun:
    days: tuple[date, ...]
    rows: int
    report_path: str | None = None
    consumed: tuple[str, ...] = field(default=(), repr=False)


def _input(name: str) -> PipelineSpec | DerivedSpec:
    try:
        return pipeline(name)
    except KeyError:
        return derived_pipeline(name)


def _published(spark: SparkSession, settings: Settings, name: str) -> list[Entry]:
    """The runs of input ``name`` a derived pipeline may read: silver runs its silver gate
    passed, or a derived input's passed runs."""
    source = _input(name)
    entries = Ledger(spark, settings, source).entries()
    if isinstance(source, DerivedSpec):
        return [e for e in entries if e.step == STAGE and e.passed and e.days]
    gates = [
        g for g in entries if g.step == "gate" and g.passed and g.detail.get("stage") == "silver"
    ]
    return [
        e for e in entries if e.step == "silver" and e.passed and any(covers(g, e) for g in gates)
    ]


def changed_days(
    spark: SparkSession, settings: Settings, spec: DerivedSpec
) -> tuple[tuple[date, ...], tuple[str, ...]]:
    """The output days the inputs changed since the pipeline's runs took them, and the ids
    of the input runs that changed them."""
    taken = {
        i
        for e in Ledger(spark, settings, spec).entries()
        if e.step == STAGE and e.passed
        for i in e.consumed or ()
    }
    changed: dict[str, set[date]] = {}
    consumed: list[str] = []
    for name in spec.input_names:
        for entry in _published(spark, settings, name):
            if entry.entry_id not in taken:
                changed.setdefault(name, set()).update(entry.days)
                consumed.append(entry.entry_id)
    return output_days(spec, changed), tuple(consumed)


def _read(spark: SparkSession, settings: Settings, name: str, days: tuple[date, ...]) -> DataFrame:
    """Input ``name`` on ``days``; with no rows (and its columns) before its first write."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from data_contracts.derive import to_spark_schema

    source = _input(name)
    schema = to_spark_schema(source.load_contract())
    if isinstance(source, DerivedSpec):
        path, column = derived_path(settings, source.name), source.day
    else:
        path, column = silver_path(settings, source), "event_date"
        extra = (T.TimestampType(), T.DateType(), T.IntegerType(), T.LongType())
        for name_, kind in zip(SILVER_COLUMNS, extra, strict=True):
            schema = schema.add(name_, kind)
    if table_version(spark, path) is None:
        return spark.createDataFrame([], schema)
    return spark.read.format("delta").load(path).where(F.col(column).isin(list(days)))


def _shape_problems(rows: DataFrame, spec: DerivedSpec) -> list[str]:
    """How the built rows' columns differ from the contract's (names, order, types)."""
    from data_contracts.derive import to_spark_schema

    wanted = [(f.name, f.dataType.simpleString()) for f in to_spark_schema(spec.load_contract())]
    built = [(f.name, f.dataType.simpleString()) for f in rows.schema.fields]
    if built == wanted:
        return []
    return [
        f"derived/{spec.transform}.py builds columns {built}, but its contract "
        f"{spec.load_contract().ref} says {wanted}: make build() return the contract's "
        "columns, in its order and types"
    ]


def build_derived(
    spark: SparkSession,
    settings: Settings,
    spec: DerivedSpec,
    run_id: str = "manual",
    dates: list[date] | None = None,
) -> DerivedRun:
    """Rebuild the days the inputs changed (or ``dates``), gated; raise
    :class:`~batch_layer.quality.QualityGateFailed` when the rows fail the contract."""
    from pyspark.sql import functions as F

    from data_contracts.derive import expectation_suite, validate_dataframes

    if dates is None:
        days, consumed = changed_days(spark, settings, spec)
    else:
        days, consumed = tuple(sorted(set(dates))), ()
    ledger = Ledger(spark, settings, spec)
    if not days:
        ledger.append(Entry(STAGE, run_id, datetime.now(UTC), (), consumed=consumed))
        log_event(_log, "derived.nothing_changed", pipeline=spec.name, run_id=run_id)
        return DerivedRun((), 0, consumed=consumed)
    module = importlib.import_module(f"derived.{spec.transform}")
    inputs = {
        name: project(_read(spark, settings, name, input_days(spec, name, days)), columns)
        for name, columns in module.READS.items()
    }
    rows = module.build(inputs).where(F.col(spec.day).isin(list(days)))
    report = GateReport(
        spec.name, STAGE, run_id, [d.isoformat() for d in days], datetime.now(UTC).isoformat()
    )
    shape = _shape_problems(rows, spec)
    if shape:
        report.reconciliations.append({"name": shape[0], "expected": 0, "actual": 1, "ok": False})
        return _refuse(spark, settings, spec, report, days)
    rows = rows.persist()
    try:
        started = time.monotonic()
        suite = expectation_suite(spec.load_contract(), flatten=False)
        (summary,) = validate_dataframes([(rows, suite)], persist=False)
        report.suites[spec.name] = suite_result(summary)
        log_event(
            _log,
            "derived.suite",
            pipeline=spec.name,
            success=summary.success,
            seconds=round(time.monotonic() - started, 2),
        )
        if not report.passed:
            return _refuse(spark, settings, spec, report, days)
        path = derived_path(settings, spec.name)
        counted = _write(rows, path, spec, days, run_id, settings)
        ensure_table_properties(spark, settings, path)
    finally:
        rows.unpersist()
    written = report.write(settings)
    ledger.append(
        Entry(
            STAGE,
            run_id,
            datetime.now(UTC),
            days,
            passed=True,
            detail={"rows": counted, "report": str(written)},
            consumed=consumed,
        )
    )
    log_event(
        _log, "derived.built", pipeline=spec.name, run_id=run_id, days=len(days), rows=counted
    )
    return DerivedRun(days, counted, str(written), consumed)


def _write(
    rows: DataFrame,
    path: str,
    spec: DerivedSpec,
    days: tuple[date, ...],
    run_id: str,
    settings: Any,
) -> int:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    counted = Observation()
    (
        rows.observe(counted, F.count(F.lit(1)).alias("rows"))
        .write.format("delta")
        .mode("overwrite")
        .partitionBy(spec.day)
        .option("replaceWhere", days_predicate(spec.day, list(days)))
        .option("userMetadata", run_id)
        .options(**creation_options(settings))
        .save(path)
    )
    return int(counted.get["rows"])


def _refuse(
    spark: SparkSession,
    settings: Settings,
    spec: DerivedSpec,
    report: GateReport,
    days: tuple[date, ...],
) -> DerivedRun:
    """Record the failed verdict (no input run taken: the days stay pending) and raise."""
    path = report.write(settings)
    Ledger(spark, settings, spec).append(
        Entry(
            STAGE,
            report.run_id,
            datetime.now(UTC),
            days,
            passed=False,
            detail={"report": str(path), "failures": report.failures()},
            consumed=(),
        )
    )
    log_event(_log, "quality.failed", stage=STAGE, run_id=report.run_id, report=str(path))
    raise QualityGateFailed(
        f"Quality gate {STAGE} failed for {spec.name} run {report.run_id}; nothing written; "
        f"report: {path}\n  " + "\n  ".join(report.failures())
    )
