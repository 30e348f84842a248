"""A Great Expectations suite over a Spark DataFrame in one pass, for the verdict.

GX's Spark engine resolves a suite metric by metric: on the silver suite that
is about thirty Spark jobs and seconds of planning on the driver, whatever the
size of the data. Most of a suite is row-level rules, and a row-level rule is a
count of the rows that break it, so :func:`count_unexpected` turns each such
expectation into one ``count_if`` of its unexpected rows and evaluates them all
in a single aggregation (plus one grouping per uniqueness rule).

The suite stays the definition and GX stays the judge of anything this module
does not translate: an expectation it cannot read (a ``mostly`` below 1, a
row condition given as text, a type it does not know) is left out of the
counts, and :func:`data_contracts.derive.validate_dataframe` hands the whole
suite to GX whenever a count is not zero or something was left out, so a
failure is reported by GX exactly as before. The unit tests run every
translated expectation through both engines on the same rows, edge cases
included (nulls, bounds, strict bounds, conditions), and require the same
verdict.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from great_expectations.expectations import Expectation
    from pyspark.sql import Column, DataFrame

__all__ = ["Counted", "count_unexpected"]


@dataclass(frozen=True)
class Counted:
    """Unexpected rows per expectation (by its index in the suite) that could be counted,
    and the indexes left to GX."""

    unexpected: dict[int, int]
    left_to_gx: tuple[int, ...]

    @property
    def all_passed(self) -> bool:
        """Every expectation was counted and none has an unexpected row."""
        return not self.left_to_gx and not any(self.unexpected.values())


def count_unexpected(
    df: DataFrame, expectations: Sequence[Expectation], column_paths: Sequence[str]
) -> Counted:
    """Count the unexpected rows of each translatable expectation over ``df`` in one
    aggregation; ``column_paths`` are the columns as GX lists them (nested paths too)."""
    from pyspark.sql import functions as F

    counts: dict[int, Column] = {}
    unexpected: dict[int, int] = {}
    uniques: dict[int, Expectation] = {}
    left: list[int] = []
    for index, expectation in enumerate(expectations):
        kind = type(expectation).__name__
        if kind == "ExpectTableColumnsToMatchSet":
            matched = _columns_match(expectation, column_paths)
            if matched is None:
                left.append(index)
            else:
                unexpected[index] = 0 if matched else 1
        elif kind == "ExpectCompoundColumnsToBeUnique" and _plain(expectation):
            uniques[index] = expectation
        else:
            broken = _unexpected_row(expectation)
            if broken is None:
                left.append(index)
            else:
                counts[index] = F.count_if(broken).alias(f"e{index}")
    try:
        if counts:
            row = df.agg(*counts.values()).collect()[0]
            unexpected |= {index: int(row[f"e{index}"] or 0) for index in counts}
        for index, expectation in uniques.items():
            unexpected[index] = _repeated_rows(df, list(expectation.column_list))
    except Exception:  # a column the table lacks, a type that does not compare: GX says why
        return Counted({}, tuple(range(len(expectations))))
    return Counted(unexpected, tuple(left))


def _plain(expectation: Any) -> bool:
    """All rows must be unique, with no row condition and GX's default for missing values:
    the only form counted here."""
    mostly = getattr(expectation, "mostly", 1)
    return (
        mostly in (1, 1.0, None)
        and getattr(expectation, "row_condition", None) is None
        and getattr(expectation, "ignore_row_if", "all_values_are_missing")
        == "all_values_are_missing"
    )


def _columns_match(expectation: Any, column_paths: Sequence[str]) -> bool | None:
    expected = expectation.column_set
    if not isinstance(expected, (list, set, tuple)):
        return None
    exact = expectation.exact_match
    if exact is None:
        exact = True
    if not isinstance(exact, bool):
        return None
    actual, wanted = set(column_paths), set(expected)
    return actual == wanted if exact else wanted <= actual


def _unexpected_row(expectation: Any) -> Column | None:
    """True on a row that breaks ``expectation`` (null or false on one that does not), or
    None when the expectation is not one of the row-level kinds counted here."""
    from pyspark.sql import functions as F

    mostly = getattr(expectation, "mostly", 1)
    if mostly not in (1, 1.0, None) or not hasattr(expectation, "column"):
        return None
    where = _condition(getattr(expectation, "row_condition", None))
    if where is False:
        return None
    column = F.col(expectation.column)
    kind = type(expectation).__name__
    if kind == "ExpectColumnValuesToNotBeNull":
        broken = column.isNull()
    elif kind == "ExpectColumnValuesToBeBetween":
        broken = _outside(column, expectation)
    elif kind == "ExpectColumnValueLengthsToBeBetween":
        broken = _outside(F.length(column), expectation)
    elif kind == "ExpectColumnValuesToBeInSet":
        values = expectation.value_set
        if not isinstance(values, (list, set, tuple)):
            return None
        broken = column.isNotNull() & ~column.isin(list(values))
    elif kind == "ExpectColumnValuesToMatchRegex":
        if not isinstance(expectation.regex, str):
            return None
        broken = column.isNotNull() & ~column.rlike(expectation.regex)
    else:
        return None
    if broken is None:
        return None
    return broken if where is None else where & broken


def _outside(value: Column, expectation: Any) -> Column | None:
    """``value`` (not null) below the minimum or above the maximum, strict or not."""
    low, high = expectation.min_value, expectation.max_value
    strict_low, strict_high = expectation.strict_min, expectation.strict_max
    if not all(isinstance(s, bool) for s in (strict_low, strict_high)):
        return None
    if any(isinstance(v, dict) for v in (low, high)):  # a suite parameter: GX resolves it
        return None
    checks = []
    if low is not None:
        checks.append(value <= low if strict_low else value < low)
    if high is not None:
        checks.append(value >= high if strict_high else value > high)
    if not checks:
        return None
    return value.isNotNull() & reduce(operator.or_, checks)


def _condition(condition: Any) -> Column | None | bool:
    """A GX row condition as a Spark column; None for no condition, False when it cannot
    be translated (text for a parser, a kind not known here)."""
    from great_expectations.expectations.row_conditions import (
        AndCondition,
        ComparisonCondition,
        NullityCondition,
        Operator,
        OrCondition,
    )
    from pyspark.sql import functions as F

    if condition is None:
        return None
    if isinstance(condition, NullityCondition):
        column = F.col(condition.column.name)
        return column.isNull() if condition.is_null else column.isNotNull()
    if isinstance(condition, ComparisonCondition):
        column, value = F.col(condition.column.name), condition.parameter
        compare = {
            Operator.EQUAL: operator.eq,
            Operator.NOT_EQUAL: operator.ne,
            Operator.LESS_THAN: operator.lt,
            Operator.LESS_THAN_OR_EQUAL: operator.le,
            Operator.GREATER_THAN: operator.gt,
            Operator.GREATER_THAN_OR_EQUAL: operator.ge,
        }.get(condition.operator)
        if compare is not None:
            return compare(column, value)
        if condition.operator == Operator.IN:
            return column.isin(list(value))
        if condition.operator == Operator.NOT_IN:
            return ~column.isin(list(value))
        return False
    if isinstance(condition, (AndCondition, OrCondition)):
        parts = [_condition(c) for c in condition.conditions]
        if any(p is False or p is None for p in parts):
            return False
        join = operator.and_ if isinstance(condition, AndCondition) else operator.or_
        return reduce(join, parts)
    return False


def _repeated_rows(df: DataFrame, columns: list[str]) -> int:
    """Rows whose combination of ``columns`` another row has too (rows where every column
    is null are left out, as GX's default ``ignore_row_if`` does)."""
    from pyspark.sql import functions as F

    some_value = reduce(operator.or_, [F.col(c).isNotNull() for c in columns])
    keyed = df.where(some_value).select(*[F.col(c).alias(f"k{i}") for i, c in enumerate(columns)])
    groups = keyed.groupBy(*keyed.columns).count().where("count > 1")
    return int(groups.agg(F.sum("count")).collect()[0][0] or 0)
