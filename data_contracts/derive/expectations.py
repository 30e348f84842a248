"""Contract -> Great Expectations suite for the event tables, and a runner for Spark.

:func:`expectation_suite` turns the contract into a GX Core 1.x suite for the
event table as silver holds it (one column per top-level field, typed objects
as structs): ``required`` -> not null, ``enum`` -> in set, ``minLength`` /
``maxLength`` -> value lengths, ``minimum`` / ``maximum`` -> values between,
``pattern`` -> regex (Java syntax, via ``rlike``), ``primaryKey`` / ``unique`` /
the ``duplicateValues`` library rule -> unique, the simple cross-field
``jsonschema`` rules (any of these fields set; if type is X then Y is set) ->
not null under a row condition, and the exact set of columns. Every
expectation's ``meta`` names the contract, field and rule it came from.
Contract rules with no translation are listed in ``suite.meta["not_checked"]``.

Nested fields are addressed by dotted path (``properties.load_time_ms``): GX on
Spark resolves such names with ``F.col`` and lists nested paths in its
``table.columns`` metric, so the suite checks silver as it is, with no
flattened copy. A required field inside an optional object is only required
where the object is present. Rows are checked through
:func:`validate_dataframe`, which needs no files and no network.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract
from data_contracts.derive.spark import to_spark_schema

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.expectations import Expectation
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["ExpectationFailure", "ValidationSummary", "expectation_suite", "validate_dataframe"]


def expectation_suite(
    contract: Contract, *, name: str | None = None, flatten: bool = True
) -> gx.ExpectationSuite:
    """The suite every silver / gold event table must pass.

    ``flatten=True`` checks the typed fields inside objects too (by dotted
    path); ``flatten=False`` checks top-level fields only. The column-set
    expectation always lists every path of the contract's Spark schema, since
    GX reports nested paths as columns.
    """
    import great_expectations as gx

    E = gx.expectations
    ref = contract.ref
    expectations: list[Expectation] = [
        E.ExpectTableColumnsToMatchSet(
            column_set=_column_paths(to_spark_schema(contract)),
            exact_match=True,
            meta={"contract": ref, "field": "*", "rule": "schema"},
        )
    ]
    for prop in contract.properties:
        expectations += _field_expectations(ref, prop, None, flatten=flatten)
    unique, not_checked = _schema_rule_expectations(contract)
    return gx.ExpectationSuite(
        name=name or f"{contract.id}-{contract.version}",
        expectations=expectations + unique,
        meta={"contract": ref, "not_checked": not_checked},
    )


def _field_expectations(
    ref: str, prop: SchemaProperty, parent: str | None, *, flatten: bool
) -> list[Expectation]:
    import great_expectations as gx

    E = gx.expectations
    path = f"{parent}.{prop.name}" if parent else str(prop.name)

    def meta(rule: str) -> dict[str, str]:
        return {"contract": ref, "field": path, "rule": rule}

    out: list[Expectation] = []
    if prop.required:
        where = {"row_condition": f"{_sql(parent)} IS NOT NULL", "condition_parser": "spark"}
        out.append(
            E.ExpectColumnValuesToNotBeNull(
                column=path, meta=meta("required"), **(where if parent else {})
            )
        )
    if prop.enum:
        values = [item.value for item in prop.enum]
        out.append(E.ExpectColumnValuesToBeInSet(column=path, value_set=values, meta=meta("enum")))
    options = prop.logicalTypeOptions or {}
    for rule, bound in (("minLength", "min_value"), ("maxLength", "max_value")):
        if rule in options:
            kwargs = {bound: options[rule]}
            out.append(
                E.ExpectColumnValueLengthsToBeBetween(column=path, meta=meta(rule), **kwargs)
            )
    for rule, bound in (("minimum", "min_value"), ("maximum", "max_value")):
        if rule in options:
            kwargs = {bound: options[rule]}
            out.append(E.ExpectColumnValuesToBeBetween(column=path, meta=meta(rule), **kwargs))
    if "pattern" in options:
        out.append(
            E.ExpectColumnValuesToMatchRegex(
                column=path, regex=options["pattern"], meta=meta("pattern")
            )
        )
    if prop.unique:
        out.append(E.ExpectColumnValuesToBeUnique(column=path, meta=meta("unique")))
    nested = prop.logicalType == "object" and prop.physicalType != "json" and prop.properties
    if flatten and nested:
        for child in prop.properties or []:
            out += _field_expectations(ref, child, path, flatten=flatten)
    return out


def _schema_rule_expectations(contract: Contract) -> tuple[list[Expectation], list[str]]:
    """Primary key, ``duplicateValues`` and cross-field rules; names of rules left unchecked."""
    import great_expectations as gx

    E = gx.expectations
    ref = contract.ref
    keys: dict[tuple[str, ...], dict[str, str]] = {}
    primary = sorted((p for p in contract.properties if p.primaryKey), key=_pk_position)
    if primary:
        columns = tuple(str(p.name) for p in primary)
        keys[columns] = {"contract": ref, "field": ", ".join(columns), "rule": "primaryKey"}
    out: list[Expectation] = []
    not_checked: list[str] = []
    for rule in contract.schema.quality or []:
        args = rule.arguments or {}
        if rule.type == "library" and rule.metric == "duplicateValues" and rule.mustBe == 0:
            columns = tuple(args.get("properties") or ())
            meta = keys.setdefault(
                columns, {"contract": ref, "field": ", ".join(columns), "rule": "duplicateValues"}
            )
            meta["quality"] = str(rule.name)
        elif rule.type == "custom" and rule.engine == "jsonschema":
            found = _cross_field(rule.implementation)
            if found is None:
                not_checked.append(str(rule.name))
            for column, condition in found or []:
                meta = {"contract": ref, "field": column, "rule": str(rule.name)}
                if rule.description:
                    meta["description"] = str(rule.description)
                out.append(
                    E.ExpectColumnValuesToNotBeNull(
                        column=column, row_condition=condition, condition_parser="spark", meta=meta
                    )
                )
        else:
            not_checked.append(str(rule.name))
    for columns, meta in keys.items():
        if len(columns) == 1:
            out.insert(0, E.ExpectColumnValuesToBeUnique(column=columns[0], meta=meta))
        else:
            out.insert(0, E.ExpectCompoundColumnsToBeUnique(column_list=list(columns), meta=meta))
    return out, not_checked


def _cross_field(rule: Any) -> list[tuple[str, str]] | None:
    """``(column that must be set, Spark SQL row condition)`` pairs, or None if untranslatable."""
    if not isinstance(rule, dict):
        return None
    any_of = rule.get("anyOf")
    if set(rule) == {"anyOf"} and all(
        set(b) == {"required"} and len(b["required"]) == 1 for b in any_of
    ):
        first, *others = [branch["required"][0] for branch in any_of]
        return [(first, " AND ".join(f"{_sql(o)} IS NULL" for o in others) or "true")]
    condition, then = rule.get("if", {}), rule.get("then", {})
    consts = {k: v.get("const") for k, v in condition.get("properties", {}).items()}
    if (
        set(rule) == {"if", "then"}
        and set(condition) <= {"properties", "required"}
        and consts
        and all(isinstance(v, str) for v in consts.values())
        and set(then) == {"required"}
    ):
        where = " AND ".join(
            f"{_sql(k)} = '{v.replace(chr(39), chr(39) * 2)}'" for k, v in consts.items()
        )
        return [(column, where) for column in then["required"]]
    return None


def _pk_position(prop: SchemaProperty) -> int:
    return prop.primaryKeyPosition if prop.primaryKeyPosition is not None else 0


def _sql(path: str | None) -> str:
    return ".".join(f"`{part}`" for part in str(path).split("."))


def _column_paths(schema: StructType, prefix: str = "") -> list[str]:
    """Column names as GX's ``table.columns`` reports them on Spark: structs and their fields."""
    from pyspark.sql.types import StructType

    paths: list[str] = []
    for item in schema.fields:
        paths.append(prefix + item.name)
        if isinstance(item.dataType, StructType):
            paths += _column_paths(item.dataType, f"{prefix}{item.name}.")
    return paths


@dataclass(frozen=True)
class ExpectationFailure:
    """One failed expectation: what was expected of which column, why, and what was seen."""

    expectation: str
    """GX expectation type, e.g. ``expect_column_values_to_be_between``."""
    column: str | None
    meta: dict[str, Any]
    """Where it came from: ``contract``, ``field``, ``rule`` (and ``quality`` / ``description``)."""
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
        head = "passed" if self.success else f"failed {len(self.failures)} expectation(s)"
        stats = self.statistics
        counts = f"{stats.get('successful_expectations')}/{stats.get('evaluated_expectations')}"
        return "\n  ".join([f"suite {head} ({counts} passed)", *map(str, self.failures)])


def validate_dataframe(df: DataFrame, suite: gx.ExpectationSuite) -> ValidationSummary:
    """Run ``suite`` on a Spark DataFrame in a throwaway, in-memory GX context.

    GX reads ``df`` several times (one pass for the bundled aggregates, more
    for uniqueness and the unexpected examples of a failing expectation):
    persist it first if it is expensive to recompute. It runs on the active
    SparkSession.
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
    batch = definition.get_batch(batch_parameters={"dataframe": df})
    result = batch.validate(suite, result_format="BASIC")
    failures = tuple(_failure(r) for r in result.results if not r.success)
    return ValidationSummary(bool(result.success), failures, dict(result.statistics))


def _failure(result: ExpectationValidationResult) -> ExpectationFailure:
    config = result.expectation_config
    kwargs = config.kwargs if config else {}
    column = kwargs.get("column") or ", ".join(kwargs.get("column_list") or []) or None
    return ExpectationFailure(
        expectation=config.type if config else "?",
        column=column,
        meta=dict(config.meta or {}) if config else {},
        observed=_observed(result),
    )


def _observed(result: ExpectationValidationResult) -> dict[str, Any]:
    info = result.exception_info or {}
    errors = [info] if "raised_exception" in info else list(info.values())
    messages = [e.get("exception_message") for e in errors if e.get("raised_exception")]
    if messages:
        return {"error": messages[0]}
    seen = result.result or {}
    if "details" in seen:
        return dict(seen["details"])
    out = {
        k: seen[k]
        for k in ("unexpected_count", "unexpected_percent", "observed_value")
        if k in seen
    }
    if "partial_unexpected_list" in seen:
        out["examples"] = list(seen["partial_unexpected_list"])[:5]
    return out
