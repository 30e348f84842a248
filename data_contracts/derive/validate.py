"""Run Great Expectations suites on Spark DataFrames: one query where it can, GX for the rest.

:func:`validate_dataframes` judges every expectation that
:mod:`data_contracts.derive.one_pass` translates in one Spark query over all
the tables given (:mod:`data_contracts.derive.one_pass_query`), and hands the
others to GX, alone, in a throwaway in-memory context (:func:`validate_with_gx`
runs a whole suite that way). Both give the same :class:`ValidationSummary`:
the statistics GX computes, and for each failed expectation what GX's
``BASIC`` result says (unexpected count and percent, the first unexpected
values, the column mismatch) or the error it raised. The unit tests hold the
two paths to the same summary, expectation by expectation.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from data_contracts.derive.one_pass import EXAMPLES

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.datasource.fluent.interfaces import Batch
    from pyspark.sql import DataFrame

__all__ = [
    "ExpectationFailure",
    "ValidationSummary",
    "validate_dataframe",
    "validate_dataframes",
    "validate_with_gx",
]


@dataclass(frozen=True)
class ExpectationFailure:
    """One failed expectation: of which column, from which contract rule, what was seen."""

    expectation: str
    """GX expectation type, e.g. ``expect_column_values_to_be_between``."""
    column: str | None
    meta: dict[str, Any]
    """``contract``, ``field`` and ``rule`` (and ``quality`` / ``description``)."""
    observed: dict[str, Any]
    """Unexpected count and examples, the column mismatch, or the error GX raised."""

    def __str__(self) -> str:
        where = self.meta.get("field", self.column)
        return f"{where}: {self.meta.get('rule', '?')} ({self.expectation}) {self.observed}"


@dataclass(frozen=True)
class ValidationSummary:
    """The outcome of a suite on a DataFrame; ``str()`` gives one line per failure."""

    success: bool
    failures: tuple[ExpectationFailure, ...] = ()
    statistics: dict[str, Any] = field(default_factory=dict)
    engines: dict[str, int] = field(default_factory=dict, compare=False)
    """Expectations judged by each engine: ``one_pass`` and ``gx``."""

    def __str__(self) -> str:
        s = self.statistics
        head = f"{s.get('successful_expectations')}/{s.get('evaluated_expectations')} passed"
        outcome = "passed" if self.success else "FAILED"
        return "\n  ".join([f"suite {outcome}: {head}", *map(str, self.failures)])


def validate_dataframe(
    df: DataFrame, suite: gx.ExpectationSuite, *, persist: bool = True
) -> ValidationSummary:
    """Run ``suite`` on a Spark DataFrame (:func:`validate_dataframes` of one table)."""
    return validate_dataframes([(df, suite)], persist=persist)[0]


def validate_dataframes(
    tables: Sequence[tuple[DataFrame, gx.ExpectationSuite]], *, persist: bool = True
) -> list[ValidationSummary]:
    """Run each suite on its table: what :mod:`.one_pass` translates in one Spark query over
    every table, the rest with GX (:func:`validate_with_gx` on those expectations alone).

    A query that fails at run time leaves everything to GX, which says why. ``persist``
    is GX's, for the expectations left to it: GX reads the table once per metric group,
    so it is persisted for them (unless it already was, or ``persist`` is false: a wide
    table read from columnar files is cheaper read column by column).
    """
    from data_contracts.derive.one_pass_query import Counted, count_suites

    try:
        counted = count_suites([(df, suite.expectations) for df, suite in tables])
    except Exception:  # Spark's run-time errors: GX reports them in its words
        counted = [Counted({}, tuple(range(len(s.expectations)))) for _, s in tables]
    summaries = []
    for (df, suite), one in zip(tables, counted, strict=True):
        judged: list[tuple[int, bool, ExpectationFailure | None]] = []
        if one.left_to_gx:
            left = [suite.expectations[i] for i in one.left_to_gx]
            judged = [
                (one.left_to_gx[i], ok, failure)
                for i, ok, failure in _gx_outcomes(df, suite.name, left, persist=persist)
            ]
        if len(judged) == len(suite.expectations):  # all GX's: in its order
            ordered = [(ok, failure) for _, ok, failure in judged]
        else:
            ordered = _in_gx_order(suite.expectations, one.results, judged)
        engines = {"one_pass": len(one.results), "gx": len(one.left_to_gx)}
        summaries.append(_summary(ordered, engines))
    return summaries


def validate_with_gx(
    df: DataFrame, suite: gx.ExpectationSuite, *, persist: bool = True
) -> ValidationSummary:
    """Run ``suite`` on a Spark DataFrame with GX alone (the reference the one pass matches)."""
    outcomes = _gx_outcomes(df, suite.name, list(suite.expectations), persist=persist)
    return _summary(
        [(ok, failure) for _, ok, failure in outcomes], {"one_pass": 0, "gx": len(outcomes)}
    )


def _in_gx_order(
    expectations: Sequence[Any],
    counted: dict[int, dict[str, Any]],
    judged: list[tuple[int, bool, ExpectationFailure | None]],
) -> list[tuple[bool, ExpectationFailure | None]]:
    """The outcomes in the order GX lists its results: those that raised first, then the
    rest grouped by column (``process_expectations_for_validation``), each group in the
    suite's order, the expectations without a column as one group where the first is."""
    outcomes = {
        index: (bool(verdict["success"]), _failure_of(expectations[index], verdict))
        for index, verdict in counted.items()
    }
    raised = [(ok, f) for _, ok, f in judged if f is not None and "error" in f.observed]
    outcomes |= {i: (ok, f) for i, ok, f in judged if not (f is not None and "error" in f.observed)}
    groups: dict[str, list[int]] = {}
    for index, expectation in enumerate(expectations):
        column = expectation.configuration.kwargs.get("column")
        groups.setdefault(column if isinstance(column, str) else "", []).append(index)
    return raised + [outcomes[i] for group in groups.values() for i in group if i in outcomes]


def _summary(
    outcomes: list[tuple[bool, ExpectationFailure | None]], engines: dict[str, int]
) -> ValidationSummary:
    """GX's suite statistics (``calc_validation_statistics``) over the outcomes in order."""
    evaluated = len(outcomes)
    successful = sum(1 for ok, _ in outcomes if ok)
    statistics = {
        "evaluated_expectations": evaluated,
        "successful_expectations": successful,
        "unsuccessful_expectations": evaluated - successful,
        "success_percent": successful / evaluated * 100 if evaluated else None,
    }
    failures = tuple(failure for ok, failure in outcomes if not ok and failure is not None)
    return ValidationSummary(successful == evaluated, failures, statistics, engines)


def _failure_of(expectation: Any, verdict: dict[str, Any]) -> ExpectationFailure | None:
    if verdict["success"]:
        return None
    return _failure(expectation.configuration, _observed(verdict.get("result") or {}))


def _observed(result: dict[str, Any]) -> dict[str, Any]:
    """What a report keeps of a ``BASIC`` result: details, unexpected count, percent, examples."""
    observed = dict(result.get("details") or {})
    observed |= {k: result[k] for k in ("unexpected_count", "unexpected_percent") if k in result}
    if "partial_unexpected_list" in result:
        observed["examples"] = list(result["partial_unexpected_list"])
    return observed


def _failure(config: Any, observed: dict[str, Any]) -> ExpectationFailure:
    columns = config.kwargs.get("column_list") or [config.kwargs.get("column")]
    column = ", ".join(c for c in columns if c) or None
    meta = {k: v for k, v in (config.meta or {}).items() if k != _POSITION}
    return ExpectationFailure(config.type, column, meta, observed)


_POSITION = "__position"
"""A meta key on the copies GX validates: where each result's expectation is in the list."""


def _gx_outcomes(
    df: DataFrame, name: str, expectations: list[Any], *, persist: bool
) -> list[tuple[int, bool, ExpectationFailure | None]]:
    """GX's verdict on each expectation (by its position in ``expectations``) with the
    failures' details, in the order GX lists its results.

    The first pass only decides pass / fail; each failed expectation is rerun for its
    unexpected count and a few examples, so a passing run stays cheap.
    """
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        progress_bars=ProgressBarsConfig(globally=False),
        analytics_enabled=False,
    )
    context = gx.get_context(mode="ephemeral", project_config=config)
    source = context.data_sources.add_spark("dataframe", persist=False)
    definition = source.add_dataframe_asset("events").add_batch_definition_whole_dataframe("all")
    copies = []
    for position, expectation in enumerate(expectations):
        tagged = copy.copy(expectation)
        tagged.meta = {**(expectation.meta or {}), _POSITION: position}
        copies.append(tagged)
    suite = gx.ExpectationSuite(name=name, expectations=copies)
    cached = df.is_cached or not persist
    if not cached:
        df.persist()
    try:
        batch = definition.get_batch(batch_parameters={"dataframe": df})
        result = batch.validate(suite, result_format="BOOLEAN_ONLY")
        outcomes = [
            (
                int(r.expectation_config.meta[_POSITION]),
                bool(r.success),
                None if r.success else _gx_failure(r, batch),
            )
            for r in result.results
        ]
    finally:
        if not cached:
            df.unpersist()
    return outcomes


def _gx_failure(result: ExpectationValidationResult, batch: Batch) -> ExpectationFailure:
    """What failed and why; a check that did not raise is rerun on ``batch`` for details."""
    config, info = result.expectation_config, result.exception_info or {}
    errors = [info] if "raised_exception" in info else list(info.values())
    messages = [e["exception_message"] for e in errors if e.get("raised_exception")]
    if messages:
        return _failure(config, {"error": messages[0]})
    details = {"result_format": "BASIC", "partial_unexpected_count": EXAMPLES}
    seen = batch.validate(config.to_domain_obj(), result_format=details).result or {}
    return _failure(config, _observed(seen))
