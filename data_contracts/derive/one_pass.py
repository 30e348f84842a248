"""What each expectation of a suite means over a Spark DataFrame, as counts one query can take.

GX's Spark engine resolves a suite metric by metric: on the silver suite that
was 65 Spark jobs. Most of a suite is row-level rules, and a row-level rule's
result is counts (rows considered, rows missing, rows unexpected); the others
are aggregates (a minimum, a mean, a row count) or the table's columns. Each
expectation this module knows becomes a :class:`Rule`: the aggregates it needs
(:meth:`Rule.aggregates`, shared between rules where they are the same), and
how to turn their values into the result GX gives for it with
``result_format="BASIC"`` (:meth:`Rule.judge`). :mod:`data_contracts.derive.one_pass_query`
takes every rule of one or more suites in one Spark query.

The rules copy GX's Spark semantics (1.x): the unexpected condition of a
column map metric is ``column IS NOT NULL AND NOT expected`` over the rows of
the row condition, ``mostly`` compares the share of the rows considered,
uniqueness is a count of the rows whose value (or combination) another row
has, a between on a missing aggregate fails, and so on. Anything this module
does not translate (a type it does not know, a suite parameter, a row
condition given as text, a column it cannot find or whose type GX would
refuse) gets no rule: GX evaluates it, alone, as before.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import TYPE_CHECKING, Any

from data_contracts.derive.one_pass_terms import (
    condition,
    has_parameters,
    inside,
    is_number,
    is_plain_number,
    is_string,
    numeric_bounds,
    plain_values,
    type_of,
)

if TYPE_CHECKING:
    from great_expectations.expectations import Expectation
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

__all__ = ["EXAMPLES", "Rule", "translate"]

EXAMPLES = 5
"""Unexpected values reported per failed expectation (GX's ``partial_unexpected_count``)."""


@dataclass
class Rule:
    """One expectation as aggregates: ``needs`` maps a key (shared between rules that need
    the same aggregate) to the aggregate; ``judge`` turns the values into GX's result."""

    needs: dict[str, Column]
    judge: Callable[[dict[str, Any]], dict[str, Any]]
    """Values by key -> ``{"success": ..., "result": {...}}`` as GX's BASIC result holds
    it, without the unexpected values (:meth:`examples` fetches those)."""
    examples: Callable[[DataFrame], DataFrame] | None = None
    """The query GX runs for the unexpected values of a map expectation (its first
    :data:`EXAMPLES` rows), or None."""
    groups: dict[str, tuple[Column | None, list[Column]]] = field(default_factory=dict)
    """Uniqueness: key -> (rows considered, grouping columns); the query counts the rows of
    repeated groups under that key."""
    multicolumn: bool = False


def translate(expectation: Expectation, schema: StructType) -> Rule | None:
    """The rule of ``expectation`` over a table of ``schema``, or None when GX must judge it."""
    translator = _TRANSLATORS.get(type(expectation).__name__)
    if translator is None or has_parameters(expectation):
        return None
    where = condition(getattr(expectation, "row_condition", None))
    if where is False or getattr(expectation, "condition_parser", None) is not None:
        return None
    mostly = getattr(expectation, "mostly", 1)
    if not isinstance(mostly, (int, float)) or isinstance(mostly, bool):
        return None
    return translator(expectation, schema, where)


# -- keys and counts shared by rules ----------------------------------------------------------


def _key(*parts: Any) -> str:
    return "|".join(str(p) for p in parts)


def _rows(where: Column | None) -> tuple[str, Column]:
    from pyspark.sql import functions as F

    if where is None:
        return "rows", F.count(F.lit(1))
    return _key("rows", where), F.count_if(where)


def _count(name: str, where: Column | None, condition: Column) -> tuple[str, Column]:
    from pyspark.sql import functions as F

    scoped = condition if where is None else where & condition
    return _key(name, scoped), F.count_if(scoped)


def _scoped(df: DataFrame, where: Column | None) -> DataFrame:
    return df if where is None else df.where(where)


# -- row-level (map) expectations -------------------------------------------------------------


def _map_rule(
    expectation: Any,
    where: Column | None,
    unexpected: Column,
    *,
    filter_null: bool = True,
    reports_missing: bool = True,
) -> Rule:
    """A column map expectation whose unexpected rows are ``unexpected`` (GX adds ``column IS
    NOT NULL`` for the metrics that leave missing values out)."""
    from pyspark.sql import functions as F

    column = F.col(expectation.column)
    if filter_null:
        unexpected = column.isNotNull() & unexpected
    rows_key, rows = _rows(where)
    nulls_key, nulls = _count("nulls", where, column.isNull())
    bad_key, bad = _count("unexpected", where, unexpected)
    needs = {rows_key: rows, bad_key: bad} | ({nulls_key: nulls} if reports_missing else {})
    mostly = expectation.mostly

    def judge(values: dict[str, Any]) -> dict[str, Any]:
        total, count = values[rows_key], values[bad_key]
        count = count if total else None  # GX's sum over no rows
        if not reports_missing:  # the (not) null expectations' own _validate
            success = total == 0 or (total - count) / total >= mostly
            return _map_output(success, total, None, count)
        nonnull = total - values[nulls_key]
        success = total == 0 or nonnull == 0 or _mostly_success(nonnull, count, mostly)
        return _map_output(success, total, nonnull, count)

    def examples(df: DataFrame) -> DataFrame:
        name = expectation.column
        data = _scoped(df, where).withColumn("__unexpected", unexpected)
        filtered = data.filter(F.col("__unexpected") == True).drop("__unexpected")  # noqa: E712
        return filtered.select(F.col(name).alias(name)).limit(EXAMPLES)

    return Rule(needs, judge, examples)


def _unique_rule(expectation: Any, where: Column | None, columns: list[str]) -> Rule:
    """Rows whose value (combination of values) another row considered has too; GX's window
    ``count(1) over (partition by ...) <= 1`` as a grouping."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    multicolumn = hasattr(expectation, "column_list")
    if multicolumn:
        ignore = expectation.ignore_row_if
        nulls = [F.col(c).isNull() for c in columns]
        if ignore == "all_values_are_missing":
            considered: Column | None = ~reduce(operator.and_, nulls)
        elif ignore == "any_value_is_missing":
            considered = ~reduce(operator.or_, nulls)
        else:
            considered = None
    else:
        considered = F.col(columns[0]).isNotNull()
    rows_key, rows = _rows(where)
    scope = considered if where is None else (where if considered is None else where & considered)
    kept_key, kept = _rows(scope)
    group_key = _key("repeated", scope, *columns)
    mostly = expectation.mostly

    def judge(values: dict[str, Any]) -> dict[str, Any]:
        total, nonnull, count = values[rows_key], values[kept_key], values[group_key]
        success = total == 0 or nonnull == 0 or _mostly_success(nonnull, count, mostly)
        return _map_output(success, total, nonnull, count)

    def examples(df: DataFrame) -> DataFrame:
        data = _scoped(df, where)
        data = data if considered is None else data.filter(considered)
        key = F.struct(*columns) if multicolumn else F.col(columns[0])
        unique = F.count(F.lit(1)).over(Window.partitionBy(key)) <= 1
        data = data.withColumn("__unexpected", ~unique)
        filtered = data.filter(F.col("__unexpected") == True).drop("__unexpected")  # noqa: E712
        return filtered.select(*[F.col(c).alias(c) for c in columns]).limit(EXAMPLES)

    groups = {group_key: (scope, [F.col(c) for c in columns])}
    return Rule({rows_key: rows, kept_key: kept}, judge, examples, groups, multicolumn)


def _mostly_success(considered: int, unexpected: int, mostly: float) -> bool:
    return (float(considered) - float(unexpected)) / float(considered) >= mostly


def _map_output(
    success: bool, element_count: int, nonnull_count: int | None, unexpected_count: int
) -> dict[str, Any]:
    """GX's ``_format_map_output`` for ``BASIC`` (the unexpected values added later)."""
    result: dict[str, Any] = {
        "element_count": element_count,
        "unexpected_count": unexpected_count,
        "unexpected_percent": None,
    }
    if nonnull_count is None:
        if element_count > 0:
            result["unexpected_percent"] = unexpected_count / element_count * 100
        return {"success": success, "result": result}
    missing = element_count - nonnull_count
    total_percent = missing_percent = nonmissing_percent = None
    if element_count > 0:
        total_percent = unexpected_count / element_count * 100
        missing_percent = missing / element_count * 100
        if nonnull_count > 0:
            nonmissing_percent = unexpected_count / nonnull_count * 100
    result["unexpected_percent"] = nonmissing_percent
    result |= {
        "missing_count": missing,
        "missing_percent": missing_percent,
        "unexpected_percent_total": total_percent,
        "unexpected_percent_nonmissing": nonmissing_percent,
    }
    return {"success": success, "result": result}


def _not_null(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if type_of(schema, e.column) is None:
        return None
    return _map_rule(e, where, F.col(e.column).isNull(), filter_null=False, reports_missing=False)


def _null(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if type_of(schema, e.column) is None:
        return None
    return _map_rule(
        e, where, F.col(e.column).isNotNull(), filter_null=False, reports_missing=False
    )


def _between(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if not (is_number(type_of(schema, e.column)) and numeric_bounds(e)):
        return None
    return _map_rule(e, where, ~inside(F.col(e.column), e))


def _lengths(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if not (is_string(type_of(schema, e.column)) and numeric_bounds(e)):
        return None
    return _map_rule(e, where, ~inside(F.length(F.col(e.column)), e))


def _length_equal(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if not (is_string(type_of(schema, e.column)) and is_plain_number(e.value)):
        return None
    return _map_rule(e, where, ~(F.length(F.col(e.column)) == e.value))


def _in_set(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    values = plain_values(e.value_set, type_of(schema, e.column))
    if values is None:
        return None
    inside = F.col(e.column).isin(values)
    if type(e).__name__ == "ExpectColumnValuesToNotBeInSet":
        return _map_rule(e, where, inside)
    return _map_rule(e, where, ~inside)


def _regex(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from pyspark.sql import functions as F

    if not (is_string(type_of(schema, e.column)) and isinstance(e.regex, str)):
        return None
    matches = F.col(e.column).rlike(e.regex)
    if type(e).__name__ == "ExpectColumnValuesToNotMatchRegex":
        return _map_rule(e, where, matches)
    return _map_rule(e, where, ~matches)


def _unique(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    columns = list(e.column_list) if hasattr(e, "column_list") else [e.column]
    if any(type_of(schema, c) is None for c in columns):
        return None
    return _unique_rule(e, where, columns)


# -- aggregate expectations -------------------------------------------------------------------


def _metric_between(e: Any, transform: Callable[[dict[str, Any]], Any]) -> Callable:
    """GX's ``_validate_metric_value_between`` for a number (``transform`` turns the values of
    the needed aggregates into the metric)."""
    import math

    from great_expectations.util import convert_to_json_serializable

    def judge(values: dict[str, Any]) -> dict[str, Any]:
        value = transform(values)
        value = None if value is None else convert_to_json_serializable(value)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return {"success": False, "result": {"observed_value": None}}
        above = e.min_value is None or (
            value > e.min_value if e.strict_min else value >= e.min_value
        )
        below = e.max_value is None or (
            value < e.max_value if e.strict_max else value <= e.max_value
        )
        return {"success": bool(above and below), "result": {"observed_value": value}}

    return judge


def _row_count(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    from great_expectations.util import convert_to_json_serializable

    key, rows = _rows(where)
    if type(e).__name__ == "ExpectTableRowCountToEqual":
        if not is_plain_number(e.value):
            return None

        def equal(values: dict[str, Any]) -> dict[str, Any]:
            observed = convert_to_json_serializable(values[key])
            return {"success": observed == e.value, "result": {"observed_value": observed}}

        return Rule({key: rows}, equal)
    if not numeric_bounds(e):
        return None
    return Rule({key: rows}, _metric_between(e, lambda v: v[key]))


def _column_aggregate(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    """min, max, mean, sum of a top-level numeric column; distinct values of any column."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ByteType, IntegerType, LongType, ShortType

    kind = type(e).__name__
    data_type = type_of(schema, e.column)
    distinct = kind in _DISTINCT
    if "." in e.column or data_type is None or not numeric_bounds(e):
        return None
    if not distinct and not is_number(data_type):
        return None
    column = F.col(e.column)
    if kind == "ExpectColumnMeanToBeBetween" and isinstance(data_type, (ByteType, ShortType)):
        return None  # GX's mean refuses them
    if kind == "ExpectColumnSumToBeBetween" and isinstance(
        data_type, (ByteType, ShortType, IntegerType, LongType)
    ):
        column = column.cast("double")  # as GX sums integers on Spark 4
    if kind == "ExpectColumnProportionOfUniqueValuesToBeBetween":
        rows_key, rows = _rows(where)
        nulls_key, nulls = _count("nulls", where, column.isNull())
        distinct_key, distinct = _count_distinct(column, where)

        def proportion(values: dict[str, Any]) -> float | int:
            total, missing = values[rows_key], values[nulls_key]
            return values[distinct_key] / (total - missing) if total and total != missing else 0

        needs = {rows_key: rows, nulls_key: nulls, distinct_key: distinct}
        return Rule(needs, _metric_between(e, proportion))
    if kind == "ExpectColumnUniqueValueCountToBeBetween":
        key, aggregate = _count_distinct(column, where)
    else:
        function = {
            "ExpectColumnMinToBeBetween": F.min,
            "ExpectColumnMaxToBeBetween": F.max,
            "ExpectColumnMeanToBeBetween": F.mean,
            "ExpectColumnSumToBeBetween": F.sum,
        }[kind]
        scoped = column if where is None else F.when(where, column)
        key, aggregate = _key(kind, scoped), function(scoped)
    return Rule({key: aggregate}, _metric_between(e, lambda v: v[key]))


_DISTINCT = {
    "ExpectColumnUniqueValueCountToBeBetween",
    "ExpectColumnProportionOfUniqueValuesToBeBetween",
}


def _count_distinct(column: Column, where: Column | None) -> tuple[str, Column]:
    from pyspark.sql import functions as F

    scoped = column if where is None else F.when(where, column)
    return _key("distinct", scoped), F.count_distinct(scoped)


# -- the table's columns ----------------------------------------------------------------------


def _columns_match(e: Any, schema: StructType, where: Column | None) -> Rule | None:
    """GX's expect_table_columns_to_match_set on Spark (nested fields listed by path)."""
    from data_contracts.derive.expectations import _column_paths

    expected_list = e.column_set
    exact = e.exact_match
    if (expected_list is not None and not isinstance(expected_list, (list, set, tuple))) or (
        exact is not None and not isinstance(exact, bool)
    ):
        return None
    actual = set(_column_paths(schema))
    expected = set(expected_list) if expected_list is not None else set()
    unexpected, missing = sorted(actual - expected), sorted(expected - actual)
    observed = sorted(actual)
    if (expected_list is None and exact is not True) or not (unexpected or missing):
        verdict: dict[str, Any] = {"success": True, "result": {"observed_value": observed}}
    else:
        mismatched = ({"unexpected": unexpected} if unexpected else {}) | (
            {"missing": missing} if missing else {}
        )
        success = not exact and not missing
        result = {"observed_value": observed, "details": {"mismatched": mismatched}}
        verdict = {"success": success, "result": result}
    return Rule({}, lambda values: verdict)


_TRANSLATORS: dict[str, Callable[[Any, StructType, Column | None], Rule | None]] = {
    "ExpectColumnValuesToNotBeNull": _not_null,
    "ExpectColumnValuesToBeNull": _null,
    "ExpectColumnValuesToBeBetween": _between,
    "ExpectColumnValueLengthsToBeBetween": _lengths,
    "ExpectColumnValueLengthsToEqual": _length_equal,
    "ExpectColumnValuesToBeInSet": _in_set,
    "ExpectColumnValuesToNotBeInSet": _in_set,
    "ExpectColumnValuesToMatchRegex": _regex,
    "ExpectColumnValuesToNotMatchRegex": _regex,
    "ExpectColumnValuesToBeUnique": _unique,
    "ExpectCompoundColumnsToBeUnique": _unique,
    "ExpectTableRowCountToBeBetween": _row_count,
    "ExpectTableRowCountToEqual": _row_count,
    "ExpectColumnMinToBeBetween": _column_aggregate,
    "ExpectColumnMaxToBeBetween": _column_aggregate,
    "ExpectColumnMeanToBeBetween": _column_aggregate,
    "ExpectColumnSumToBeBetween": _column_aggregate,
    "ExpectColumnUniqueValueCountToBeBetween": _column_aggregate,
    "ExpectColumnProportionOfUniqueValuesToBeBetween": _column_aggregate,
    "ExpectTableColumnsToMatchSet": _columns_match,
}
"""Expectation type -> its translator; a type not here is GX's to evaluate."""
