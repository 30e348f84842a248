"""Contract -> Great Expectations suite for the event tables (run by :mod:`.validate`).

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
from functools import reduce
from typing import TYPE_CHECKING, Any

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract
from data_contracts.derive.spark import to_spark_schema

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.expectations import Expectation
    from great_expectations.expectations.row_conditions import Condition
    from pyspark.sql.types import StructType

__all__ = ["expectation_suite"]


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
