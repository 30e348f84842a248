"""The quality gate: silver and gold are validated before anything is published.

Two checks, each a step of the pipeline DAG:

- :func:`check_silver` runs the contract's Great Expectations suite
  (:func:`data_contracts.derive.expectation_suite`: not-null keys, accepted
  values, ranges, patterns, unique ``(source_id, event_id)``) on the silver
  days gold is about to read, and reconciles what each silver run read and
  wrote: every bronze record of its offset range is a parsed event or a
  reject; every event is a silver row or a copy whose event silver holds
  within a day (:mod:`batch_layer.dedupe`); every reject is recorded. The
  run's side of each count is what silver observed while it staged and wrote
  (its ledger entry); the other side is counted in the tables by the run's
  Kafka range (two columns, pruned to the run's files by Delta's statistics),
  and a dropped copy's key is looked up in silver. When a ``forget`` came
  between silver and its gate (the suppression list is not the one the run
  read) or the run rebuilt days, both sides are counted again from the run's
  staging folder (:mod:`batch_layer.staging`), its bronze offsets and
  silver's rows on its days, all without the records of suppressed users, so
  an erasure at any point leaves both sides balanced. Either way the gate
  costs what the run cost, not what bronze holds.
- :func:`check_gold` runs a suite derived from each view's spec (the exact
  column set, keys and window not null, one row per window and key, counts
  and sums not negative) on the days publish is about to load, and the
  pipeline's silver -> gold reconciliations (e.g. site events per day equal
  silver rows per day).

Each suite is judged in one Spark query where its expectations allow
(:func:`data_contracts.derive.validate_dataframes`: one aggregation for the
row-level and aggregate rules, one grouping per uniqueness rule; GX judges
the rest), with the results GX gives, and a log line says which engine judged
how many. Each check writes a report (JSON for machines, Markdown for people) under
``settings.batch.reports_dir/<pipeline>/<run_id>/``, logs its path, records
the verdict in the pipeline ledger and raises :class:`QualityGateFailed`
when anything failed. Gold will not read silver, and publish will not load
gold, past a failed or missing gate, so the batch boundary does not move.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch_layer.gold import gold_path
from batch_layer.ledger import Entry, Ledger, pending
from batch_layer.run_figures import silver_run_figures
from batch_layer.silver import SILVER_COLUMNS, silver_path
from batch_layer.staging import awaiting_gate
from batch_layer.tables import delete_path
from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import Suppressions, read_suppressions
from data_contracts import load_contract
from pipelines import PipelineSpec
from views import ViewSpec
from views.input import PAYLOAD
from views.kinds import kind

if TYPE_CHECKING:
    import great_expectations as gx
    from pyspark.sql import DataFrame, SparkSession

    from data_contracts.derive import ValidationSummary

__all__ = [
    "GateReport",
    "QualityGateFailed",
    "check_gold",
    "check_silver",
    "suite_result",
    "view_suite",
]

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


def suite_result(summary: Any) -> dict[str, Any]:
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
    """Validate the silver days gold has not read yet; raise :class:`QualityGateFailed`.

    The suite runs on those days; the reconciliations on what each pending
    silver run read and wrote (:func:`_reconcile_silver_run`), never on all of
    bronze. A passed gate deletes the runs' staging folders.
    """
    from pyspark.sql import functions as F

    from data_contracts.derive import expectation_suite, validate_dataframes

    entries = Ledger(spark, settings, spec).entries()
    checked = pending(entries, "silver", "gold")
    unchecked = awaiting_gate(entries)  # a run a passed gate reconciled has no staging left
    days = sorted({day for e in checked for day in e.days})
    report = GateReport(
        spec.name, "silver", run_id, [d.isoformat() for d in days], datetime.now(UTC).isoformat()
    )
    if days:
        contract = load_contract(spec.contract, spec.contract_major)
        silver = spark.read.format("delta").load(silver_path(settings, spec))
        chosen = silver.where(F.col("event_date").isin(list(days)))
        # The typed columns only (the payloads stay on disk), every expectation in one query.
        typed = [c for c in chosen.columns if c != PAYLOAD]
        suite = expectation_suite(contract, extra_columns=SILVER_COLUMNS)
        started = time.monotonic()
        (summary,) = validate_dataframes([(chosen.select(*typed), suite)])
        _log_suite("silver", "silver", summary, started)
        report.suites["silver"] = suite_result(summary)
        report.reconciliations.append(
            _reconcile(
                "silver keeps the whole event (payload column)", 1, int(PAYLOAD in chosen.columns)
            )
        )
        suppressions = read_suppressions(settings.kafka) if unchecked else Suppressions()
        for entry in checked:
            if entry.entry_id in unchecked:
                report.reconciliations += _reconcile_silver_run(
                    spark, settings, spec, entry, suppressions
                )
    concluded = _conclude(spark, settings, spec, report, checked)
    for entry in checked:
        if "staging" in entry.detail:
            delete_path(spark, entry.detail["staging"])
    return concluded


def _reconcile_silver_run(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    entry: Entry,
    suppressions: Suppressions,
) -> list[dict[str, Any]]:
    """What one silver run read and wrote (:func:`batch_layer.run_figures.silver_run_figures`),
    as reconciliations:

    - every bronze record of its range is an event or a reject;
    - every event of the run is a silver row or a copy silver dropped;
    - each dropped copy's key is in silver within a day of it
      (:mod:`batch_layer.dedupe`): nothing was lost;
    - every reject of the run is in the rejects table.
    """
    if "staging" not in entry.detail:
        return []
    label = f"silver run {entry.run_id}"
    figures = silver_run_figures(spark, settings, spec, entry, suppressions)
    if figures is None:
        why = "staging folder gone (a folder from before staging was a Delta table, which "
        return [_reconcile(f"{label}: not reconciled, {why}forget deletes whole)", 0, 0)]
    log_event(
        _log, "quality.silver_run_counted", pipeline=spec.name, run_id=entry.run_id, **figures
    )
    return [
        _reconcile(
            f"{label}: bronze records of its range = events + rejects",
            figures["bronze"],
            figures["records"],
        ),
        _reconcile(
            f"{label}: its events = silver rows holding them + copies dropped",
            figures["events"],
            figures["held"] + figures["copies"],
        ),
        _reconcile(f"{label}: dropped copies without their event in silver", 0, figures["orphans"]),
        _reconcile(
            f"{label}: its rejects in the rejects table", figures["rejects"], figures["recorded"]
        ),
    ]


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
        if kind(measure.kind).non_negative and not measure.signed:
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
    """Validate the gold days publish has not loaded yet; raise :class:`QualityGateFailed`.

    Every view's suite runs in one Spark query (:func:`validate_dataframes`), and the
    reconciliations' figures in one more.
    """
    from pyspark.sql import functions as F

    from data_contracts.derive import validate_dataframes

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
        started = time.monotonic()
        summaries = validate_dataframes(
            [(tables[view.name], view_suite(view)) for view in spec.view_specs]
        )
        for view, summary in zip(spec.view_specs, summaries, strict=True):
            _log_suite("gold", f"gold/{view.name}", summary, started)
            report.suites[f"gold/{view.name}"] = suite_result(summary)
        silver = spark.read.format("delta").load(silver_path(settings, spec))
        silver = silver.where(F.col("event_date").isin(list(days)))
        report.reconciliations += _reconcile_gold(tables, silver, spec)
    return _conclude(spark, settings, spec, report, checked)


def _reconcile_gold(
    tables: dict[str, DataFrame], silver: DataFrame, spec: PipelineSpec
) -> list[dict[str, Any]]:
    """Each rule's ``sum(view.measure)`` against its silver row count, every figure in one
    Spark action: one aggregation of silver and one per view the rules name."""
    from pyspark.sql import functions as F

    from data_contracts.derive.one_pass_query import one_row_values

    if not spec.reconcile:
        return []
    rules = list(enumerate(spec.reconcile))
    parts = [silver.agg(*[F.count_if(F.expr(r.silver_where)).alias(f"s{i}") for i, r in rules])]
    for name in dict.fromkeys(r.view for _, r in rules):
        sums = [F.sum(r.measure).alias(f"g{i}") for i, r in rules if r.view == name]
        parts.append(tables[name].agg(*sums))
    row = one_row_values(parts)
    return [
        _reconcile(
            f"silver rows where {r.silver_where} = sum({r.view}.{r.measure})",
            row[f"s{i}"],
            row.get(f"g{i}") or 0,
        )
        for i, r in rules
    ]


def _log_suite(stage: str, table: str, summary: ValidationSummary, started: float) -> None:
    """Which engine judged how many expectations, and the time since ``started``."""
    log_event(
        _log,
        "quality.suite_checked",
        stage=stage,
        table=table,
        success=summary.success,
        expectations=summary.statistics.get("evaluated_expectations"),
        seconds=round(time.monotonic() - started, 2),
        **summary.engines,
    )
