"""Contract -> Great Expectations suite for the event tables, and a runner for Spark.

The GX Core 1.x suite checks the event table as silver holds it: ``required``
-> not null, ``enum`` -> in set, ``minLength`` / ``maxLength`` -> lengths,
``minimum`` / ``maximum`` -> between, ``pattern`` -> regex (Java syntax),
``primaryKey`` / ``unique`` / ``duplicateValues`` -> unique, the simple
cross-field ``jsonschema`` rules -> not null on the rows concerned, plus the
exact set of columns. Each expectation's ``meta`` names the contract, field
and rule, so a failure says why; untranslated rules are listed in
``suite.meta["not_checked"]``.

Nested fields are addressed by dotted path (``properties.load_time_ms``): GX
on Spark resolves these with ``F.col`` and lists nested paths in its
``table.columns`` metric, so silver is checked as it is, with no flattened
copy. A required field inside an object is required where the object is set.
GX is imported lazily, as the collector imports this package.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract
from data_contracts.derive.spark import to_spark_schema

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.datasource.fluent.interfaces import Batch
    from great_expectations.expectations import Expectation
    from great_expectations.expectations.row_conditions import Condition
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "ExpectationFailure",
    "ValidationSummary",
    "expectation_suite",
    "validate_dataframe",
    "validate_with_gx",
]

_EXAMPLES = 5  # unexpected values reported per failed expectation


def expectation_suite(
    contract: Contract,
    *,
    name: str | None = None,
    flatten: bool = True,
    extra_columns: Sequence[str] = (),
) -> gx.ExpectationSuite:
    """The suite a silver or gold event table must pass.

    ``flatten=True`` also checks the typed fields inside objects, by dotted
    path; ``flatten=False`` checks top-level fields only. The column set always
    lists every path of the contract's Spark schema (GX lists nested paths),
    plus ``extra_columns`` the table adds, e.g. a partition column.
    """
    import great_expectations as gx

    columns = gx.expectations.ExpectTableColumnsToMatchSet(
        column_set=[*_column_paths(to_spark_schema(contract)), *extra_columns],
        exact_match=True,
        meta={"contract": contract.ref, "field": "*", "rule": "schema"},
    )
    expectations: list[Expectation] = [columns]
    for prop in contract.properties:
        expectations += _field_expectations(contract.ref, prop, None, flatten)
    table_rules, not_checked = _schema_rules(contract)
    return gx.ExpectationSuite(
        name=name or f"{contract.id}-{contract.version}",
        expectations=expectations + table_rules,
        meta={"contract": contract.ref, "not_checked": not_checked},
    )


def _field_expectations(
    ref: str, prop: SchemaProperty, parent: str | None, flatten: bool
) -> list[Expectation]:
    from great_expectations import expectations as E
    from great_expectations.expectations.row_conditions import Column

    path = f"{parent}.{prop.name}" if parent else str(prop.name)
    out: list[Expectation] = []

    def add(kind: type[Expectation], rule: str, **kwargs: Any) -> None:
        out.append(kind(column=path, meta={"contract": ref, "field": path, "rule": rule}, **kwargs))

    if prop.required:
        where = Column(parent).is_not_null() if parent else None
        add(E.ExpectColumnValuesToNotBeNull, "required", row_condition=where)
    if prop.enum:
        add(E.ExpectColumnValuesToBeInSet, "enum", value_set=[item.value for item in prop.enum])
    options = prop.logicalTypeOptions or {}
    for rule, bound in (("minLength", "min_value"), ("maxLength", "max_value")):
        if rule in options:
            add(E.ExpectColumnValueLengthsToBeBetween, rule, **{bound: options[rule]})
    for rule, bound in (("minimum", "min_value"), ("maximum", "max_value")):
        if rule in options:
            add(E.ExpectColumnValuesToBeBetween, rule, **{bound: options[rule]})
    if "pattern" in options:
        add(E.ExpectColumnValuesToMatchRegex, "pattern", regex=options["pattern"])
    if prop.unique:
        add(E.ExpectColumnValuesToBeUnique, "unique")
    if flatten and prop.logicalType == "object" and prop.physicalType != "json":
        for child in prop.properties or []:
            out += _field_expectations(ref, child, path, flatten)
    return out


def _schema_rules(contract: Contract) -> tuple[list[Expectation], list[str]]:
    """Uniqueness (primary key, ``duplicateValues``) and cross-field rules; rules not checked."""
    from great_expectations import expectations as E

    ref = contract.ref
    keys: dict[tuple[str, ...], dict[str, str]] = {}
    if any(p.primaryKey for p in contract.properties):
        columns = contract.key
        keys[columns] = {"contract": ref, "field": ", ".join(columns), "rule": "primaryKey"}
    cross: list[Expectation] = []
    not_checked: list[str] = []
    for rule in contract.schema.quality or []:
        if rule.type == "library" and rule.metric == "duplicateValues" and rule.mustBe == 0:
            columns = tuple((rule.arguments or {}).get("properties") or ())
            meta = {"contract": ref, "field": ", ".join(columns), "rule": "duplicateValues"}
            keys.setdefault(columns, meta)["quality"] = str(rule.name)
            continue
        translated = _cross_field(rule.implementation) if rule.engine == "jsonschema" else None
        if not translated:
            not_checked.append(str(rule.name))
        for column, where in translated or []:
            meta = {"contract": ref, "field": column, "rule": str(rule.name)}
            meta |= {"description": str(rule.description)} if rule.description else {}
            cross.append(
                E.ExpectColumnValuesToNotBeNull(column=column, row_condition=where, meta=meta)
            )
    unique: list[Expectation] = [
        E.ExpectColumnValuesToBeUnique(column=cols[0], meta=meta)
        if len(cols) == 1
        else E.ExpectCompoundColumnsToBeUnique(column_list=list(cols), meta=meta)
        for cols, meta in keys.items()
    ]
    return unique + cross, not_checked


def _cross_field(rule: Any) -> list[tuple[str, Condition | None]] | None:
    """(column that must be set, rows it must be set on) pairs, or None if untranslatable."""
    from great_expectations.expectations.row_conditions import Column

    if not isinstance(rule, dict):
        return None
    branches = rule.get("anyOf") or []
    fields = [b["required"] for b in branches if list(b) == ["required"]]
    if set(rule) == {"anyOf"} and len(fields) == len(branches) and all(len(f) == 1 for f in fields):
        (first,), *others = fields
        return [(first, _all([Column(other).is_null() for (other,) in others]))]
    condition, then = rule.get("if", {}), rule.get("then", {})
    consts = {k: v.get("const") for k, v in condition.get("properties", {}).items()}
    if (
        set(rule) == {"if", "then"}
        and set(condition) <= {"properties", "required"}
        and consts
        and None not in consts.values()
        and list(then) == ["required"]
    ):
        where = _all([Column(name) == value for name, value in consts.items()])
        return [(column, where) for column in then["required"]]
    return None


def _all(conditions: list[Condition]) -> Condition | None:
    return reduce(operator.and_, conditions) if conditions else None


def _column_paths(schema: StructType, prefix: str = "") -> list[str]:
    """Column names as GX's ``table.columns`` lists them on Spark: structs, then their fields."""
    from pyspark.sql.types import StructType

    paths: list[str] = []
    for item in schema.fields:
        paths.append(prefix + item.name)
        if isinstance(item.dataType, StructType):
            paths += _column_paths(item.dataType, f"{prefix}{item.name}.")
    return paths


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

    def __str__(self) -> str:
        s = self.statistics
        head = f"{s.get('successful_expectations')}/{s.get('evaluated_expectations')} passed"
        outcome = "passed" if self.success else "FAILED"
        return "\n  ".join([f"suite {outcome}: {head}", *map(str, self.failures)])


def validate_dataframe(
    df: DataFrame, suite: gx.ExpectationSuite, *, persist: bool = True
) -> ValidationSummary:
    """Run ``suite`` on a Spark DataFrame, in a throwaway in-memory GX context.

    First in one pass (:mod:`data_contracts.derive.one_pass`): when every expectation
    could be counted there and none has an unexpected row, the suite passed and GX is
    not asked. Otherwise GX runs the whole suite, as below, and its results are the answer.

    GX reads ``df`` once per metric group, so it is persisted for the run
    (unless it already was, or ``persist`` is false) and unpersisted afterwards.
    Pass ``persist=False`` for a wide table read from columnar files: each
    metric then reads only its columns, where a cache would hold every column
    (a day of silver with its payloads does not fit a laptop driver's heap). The first pass only
    decides pass / fail; each failed expectation is rerun for its unexpected
    count and a few examples, so a passing run stays cheap.
    """
    from data_contracts.derive.one_pass import count_unexpected

    counted = count_unexpected(df, suite.expectations, _column_paths(df.schema))
    if counted.all_passed:
        n = len(suite.expectations)
        statistics = {
            "evaluated_expectations": n,
            "successful_expectations": n,
            "unsuccessful_expectations": 0,
            "success_percent": 100.0 if n else None,
        }
        return ValidationSummary(True, (), statistics)
    return validate_with_gx(df, suite, persist=persist)


def validate_with_gx(
    df: DataFrame, suite: gx.ExpectationSuite, *, persist: bool = True
) -> ValidationSummary:
    """Run ``suite`` on a Spark DataFrame with GX alone (no one-pass verdict first)."""
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
    cached = df.is_cached or not persist
    if not cached:
        df.persist()
    try:
        batch = definition.get_batch(batch_parameters={"dataframe": df})
        result = batch.validate(suite, result_format="BOOLEAN_ONLY")
        failures = tuple(_failure(r, batch) for r in result.results if not r.success)
    finally:
        if not cached:
            df.unpersist()
    return ValidationSummary(bool(result.success), failures, dict(result.statistics))


def _failure(result: ExpectationValidationResult, batch: Batch) -> ExpectationFailure:
    """What failed and why; a check that did not raise is rerun on ``batch`` for details."""
    config, info = result.expectation_config, result.exception_info or {}
    errors = [info] if "raised_exception" in info else list(info.values())
    messages = [e["exception_message"] for e in errors if e.get("raised_exception")]
    observed: dict[str, Any] = {"error": messages[0]} if messages else {}
    if not messages:
        details = {"result_format": "BASIC", "partial_unexpected_count": _EXAMPLES}
        seen = batch.validate(config.to_domain_obj(), result_format=details).result or {}
        observed = dict(seen.get("details") or {})
        observed |= {k: seen[k] for k in ("unexpected_count", "unexpected_percent") if k in seen}
        if "partial_unexpected_list" in seen:
            observed["examples"] = list(seen["partial_unexpected_list"])
    columns = config.kwargs.get("column_list") or [config.kwargs.get("column")]
    column = ", ".join(c for c in columns if c) or None
    return ExpectationFailure(config.type, column, dict(config.meta or {}), observed)
