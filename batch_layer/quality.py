"""The quality gate: silver and gold are validated before anything is published.

Two checks, each a step of the pipeline DAG:

- :func:`check_silver` runs the contract's Great Expectations suite
  (:func:`data_contracts.derive.expectation_suite`: not-null keys, accepted
  values, ranges, patterns, unique ``(source_id, event_id)``) on the silver days gold is
  about to read, and reconciles row counts: every bronze record is a parsed
  event or a reject; the events whose first copy in the log falls on those
  days are exactly the silver rows of those days (a later copy counts where
  its first copy is, as silver dedupes). Bronze is read as silver reads it,
  without the records of suppressed users.
- :func:`check_gold` runs a suite derived from each view's spec (the exact
  column set, keys and window not null, one row per window and key, counts
  and sums not negative) on the days publish is about to load, and the
  pipeline's silver -> gold reconciliations (e.g. site events per day equal
  silver rows per day).

Each check writes a report (JSON for machines, Markdown for people) under
``settings.batch.reports_dir/<pipeline>/<run_id>/``, logs its path, records
the verdict in the pipeline ledger and raises :class:`QualityGateFailed`
when anything failed. Gold will not read silver, and publish will not load
gold, past a failed or missing gate, so the batch boundary does not move.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch_layer.gold import gold_path
from batch_layer.ledger import Entry, Ledger, pending
from batch_layer.pipelines import PipelineSpec
from batch_layer.silver import (
    number_copies,
    parse_bronze,
    read_bronze,
    rejects_path,
    silver_path,
)
from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import Settings
from views import ViewSpec
from views.input import PAYLOAD
from views.kinds import kind

if TYPE_CHECKING:
    import great_expectations as gx
    from pyspark.sql import SparkSession

__all__ = ["GateReport", "QualityGateFailed", "check_gold", "check_silver", "view_suite"]

_log = get_logger(__name__)


class QualityGateFailed(RuntimeError):
    """A suite or a reconciliation failed; the message names them and the report."""


@dataclass
class GateReport:
    """What one gate checked and found."""

    pipeline: str
    stage: str
    run_id: str
    days: list[str]
    checked_at: str
    suites: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per table: success, statistics and each failed expectation (field, rule, observed)."""
    reconciliations: list[dict[str, Any]] = field(default_factory=list)
    """Each: name, expected, actual, ok."""

    @property
    def passed(self) -> bool:
        return all(s["success"] for s in self.suites.values()) and all(
            r["ok"] for r in self.reconciliations
        )

    def failures(self) -> list[str]:
        """One line per failed expectation or reconciliation."""
        lines = [
            f"{table}: {f['field']} {f['rule']} ({f['expectation']}) {f['observed']}"
            for table, suite in self.suites.items()
            for f in suite["failures"]
        ]
        lines += [
            f"reconciliation {r['name']}: expected {r['expected']}, got {r['actual']}"
            for r in self.reconciliations
            if not r["ok"]
        ]
        return lines

    def markdown(self) -> str:
        verdict = "PASSED" if self.passed else "FAILED"
        out = [
            f"# Quality gate {self.stage}: {verdict}",
            "",
            f"- pipeline: `{self.pipeline}`, run: `{self.run_id}`, checked at {self.checked_at}",
            f"- days: {', '.join(self.days) or 'none'}",
            "",
            "## Suites",
            "",
            "| table | result | expectations passed |",
            "| --- | --- | --- |",
        ]
        for table, suite in self.suites.items():
            stats = suite["statistics"]
            passed = f"{stats.get('successful_expectations')}/{stats.get('evaluated_expectations')}"
            out.append(f"| {table} | {'ok' if suite['success'] else 'FAILED'} | {passed} |")
        out += ["", "## Reconciliations", "", "| check | expected | actual | result |"]
        out.append("| --- | --- | --- | --- |")
        for r in self.reconciliations:
            ok = "ok" if r["ok"] else "FAILED"
            out.append(f"| {r['name']} | {r['expected']} | {r['actual']} | {ok} |")
        failures = self.failures()
        if failures:
            out += ["", "## Failures", "", *(f"- {line}" for line in failures)]
        return "\n".join(out) + "\n"

    def write(self, settings: Settings) -> Path:
        folder = settings.batch.reports_dir / self.pipeline / _safe(self.run_id)
        folder.mkdir(parents=True, exist_ok=True)
        payload = asdict(self) | {"passed": self.passed, "failures": self.failures()}
        (folder / f"{self.stage}.json").write_text(json.dumps(payload, indent=2, default=str))
        path = folder / f"{self.stage}.md"
        path.write_text(self.markdown())
        return path


def _safe(run_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)


def _suite_result(summary: Any) -> dict[str, Any]:
    return {
        "success": summary.success,
        "statistics": summary.statistics,
        "failures": [
            {
                "expectation": f.expectation,
                "field": f.meta.get("field", f.column),
                "rule": f.meta.get("rule"),
                "observed": f.observed,
            }
            for f in summary.failures
        ],
    }


def _reconcile(name: str, expected: int, actual: int) -> dict[str, Any]:
    return {
        "name": name,
        "expected": int(expected),
        "actual": int(actual),
        "ok": expected == actual,
    }


def _conclude(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    report: GateReport,
    checked: list[Entry],
) -> GateReport:
    """Write the report, record the verdict on the ``checked`` ledger entries, raise if failed."""
    path = report.write(settings)
    Ledger(spark, settings, spec).append(
        Entry(
            "gate",
            report.run_id,
            datetime.now(UTC),
            tuple(date.fromisoformat(d) for d in report.days),
            passed=report.passed,
            detail={"stage": report.stage, "report": str(path), "failures": report.failures()},
            consumed=tuple(e.entry_id for e in checked),
        )
    )
    log_event(
        _log,
        "quality.passed" if report.passed else "quality.failed",
        stage=report.stage,
        run_id=report.run_id,
        report=str(path),
        failures=report.failures(),
    )
    if not report.passed:
        raise QualityGateFailed(
            f"Quality gate {report.stage} failed for {spec.name} run {report.run_id}; "
            f"report: {path}\n  " + "\n  ".join(report.failures())
        )
    return report


def check_silver(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> GateReport:
    """Validate the silver days gold has not read yet; raise :class:`QualityGateFailed`."""
    from pyspark.sql import functions as F

    from data_contracts import load_contract
    from data_contracts.derive import expectation_suite, validate_dataframe

    checked = pending(Ledger(spark, settings, spec).entries(), "silver", "gold")
    days = sorted({day for e in checked for day in e.days})
    report = GateReport(
        spec.name, "silver", run_id, [d.isoformat() for d in days], datetime.now(UTC).isoformat()
    )
    if days:
        contract = load_contract(spec.contract, spec.contract_major)
        suite = expectation_suite(contract, extra_columns=("event_time", "event_date", PAYLOAD))
        silver = spark.read.format("delta").load(silver_path(settings, spec))
        chosen = silver.where(F.col("event_date").isin(list(days)))
        # Not cached: each metric reads its columns of the days' files, never the payloads.
        report.suites["silver"] = _suite_result(validate_dataframe(chosen, suite, persist=False))

        bronze = read_bronze(spark, settings, spec)
        events, _ = parse_bronze(
            bronze, spec, EventTimeBounds.from_settings(settings).future_tolerance
        )
        rejects = spark.read.format("delta").load(rejects_path(settings, spec)).count()
        report.reconciliations.append(
            _reconcile(
                "bronze records = parsed events + rejects", bronze.count(), events.count() + rejects
            )
        )
        # Silver keeps each event's first copy, on the first copy's day: a duplicate
        # whose corrected time fell on a pending day belongs to another day's row.
        firsts = number_copies(events, contract.key).where(
            (F.col("copy") == 1) & F.col("event_date").isin(list(days))
        )
        report.reconciliations.append(
            _reconcile(
                "first copies of the days' events = silver rows", firsts.count(), chosen.count()
            )
        )
    return _conclude(spark, settings, spec, report, checked)


def view_suite(view: ViewSpec) -> gx.ExpectationSuite:
    """The suite a gold view table must pass, derived from the view's spec."""
    import great_expectations as gx
    from great_expectations import expectations as E

    def meta(field_: str, rule: str) -> dict[str, str]:
        return {"view": view.name, "field": field_, "rule": rule}

    expectations: list[Any] = [
        E.ExpectTableColumnsToMatchSet(
            column_set=[*view.columns, "window_date"],
            exact_match=True,
            meta=meta("*", "schema"),
        ),
        E.ExpectCompoundColumnsToBeUnique(
            column_list=["window_start", *view.keys], meta=meta("window_start, keys", "one row")
        ),
    ]
    for column in ("window_start", "window_date", *view.keys):
        expectations.append(
            E.ExpectColumnValuesToNotBeNull(column=column, meta=meta(column, "required"))
        )
    for measure in view.measures:
        if kind(measure.kind).non_negative:
            expectations.append(
                E.ExpectColumnValuesToBeBetween(
                    column=measure.name, min_value=0, meta=meta(measure.name, "not negative")
                )
            )
    return gx.ExpectationSuite(name=f"gold-{view.name}", expectations=expectations)


def check_gold(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> GateReport:
    """Validate the gold days publish has not loaded yet; raise :class:`QualityGateFailed`."""
    from pyspark.sql import functions as F

    from data_contracts.derive import validate_dataframe

    checked = pending(Ledger(spark, settings, spec).entries(), "gold", "publish")
    days = sorted({day for e in checked for day in e.days})
    report = GateReport(
        spec.name, "gold", run_id, [d.isoformat() for d in days], datetime.now(UTC).isoformat()
    )
    if days:
        tables = {}
        for view in spec.view_specs:
            gold = spark.read.format("delta").load(gold_path(settings, view))
            tables[view.name] = gold.where(F.col("window_date").isin(list(days)))
            report.suites[f"gold/{view.name}"] = _suite_result(
                validate_dataframe(tables[view.name], view_suite(view))
            )
        silver = spark.read.format("delta").load(silver_path(settings, spec))
        silver = silver.where(F.col("event_date").isin(list(days)))
        for rule in spec.reconcile:
            total = tables[rule.view].agg(F.sum(rule.measure)).collect()[0][0] or 0
            expected = silver.where(F.expr(rule.silver_where)).count()
            name = f"silver rows where {rule.silver_where} = sum({rule.view}.{rule.measure})"
            report.reconciliations.append(_reconcile(name, expected, total))
    return _conclude(spark, settings, spec, report, checked)
