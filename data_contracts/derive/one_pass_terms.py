"""The terms :mod:`data_contracts.derive.one_pass` builds its rules from: a column's type,
bounds and sets GX would compare as they are, suite parameters, and GX row conditions as
Spark columns. Each answers None (or False) where GX, not a rule, must judge."""

from __future__ import annotations

import operator
from functools import reduce
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "condition",
    "has_parameters",
    "inside",
    "is_number",
    "is_plain_number",
    "is_string",
    "numeric_bounds",
    "plain_values",
    "type_of",
]


def has_parameters(expectation: Any) -> bool:
    """A suite parameter (``{"$PARAMETER": ...}``) anywhere: GX resolves those."""
    values = expectation.dict()  # GX's models are pydantic v1's
    return any(isinstance(v, dict) and "$PARAMETER" in v for v in values.values())


def type_of(schema: StructType, path: str) -> DataType | None:
    """The type of a column or dotted nested path, or None when the table has no such column."""
    from pyspark.sql.types import StructType

    data_type: Any = schema
    for part in path.split("."):
        if not isinstance(data_type, StructType) or part not in data_type.fieldNames():
            return None
        data_type = data_type[part].dataType
    return data_type


def is_number(data_type: DataType | None) -> bool:
    from pyspark.sql.types import DecimalType, NumericType

    return isinstance(data_type, NumericType) and not isinstance(data_type, DecimalType)


def is_string(data_type: DataType | None) -> bool:
    from pyspark.sql.types import StringType

    return isinstance(data_type, StringType)


def is_plain_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def numeric_bounds(e: Any) -> bool:
    """Numbers (or None) for bounds, booleans for strictness, not both bounds missing."""
    low, high = e.min_value, e.max_value
    if low is None and high is None:
        return False
    if not all(v is None or is_plain_number(v) for v in (low, high)):
        return False
    if low is not None and high is not None and low > high:
        return False  # GX raises; let it say so
    return all(isinstance(s, bool) for s in (e.strict_min, e.strict_max))


def inside(value: Column, e: Any) -> Column:
    """GX's column_values.between condition on Spark."""
    from pyspark.sql import functions as F

    low, high = e.min_value, e.max_value
    checks = []
    if low is not None:
        checks.append(value > F.lit(low) if e.strict_min else value >= F.lit(low))
    if high is not None:
        checks.append(value < F.lit(high) if e.strict_max else value <= F.lit(high))
    return reduce(operator.and_, checks)


def plain_values(values: Any, data_type: DataType | None) -> list | None:
    """The set as a list when its values compare with the column as they are (strings with a
    string column, numbers with a numeric one), else None."""
    if not isinstance(values, (list, set, tuple)) or not values:
        return None
    if is_string(data_type) and all(isinstance(v, str) for v in values):
        return list(values)
    if is_number(data_type) and all(is_plain_number(v) for v in values):
        return list(values)
    return None


def condition(given: Any) -> Column | None | bool:
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

    if given is None:
        return None
    if isinstance(given, NullityCondition):
        column = F.col(given.column.name)
        return column.isNull() if given.is_null else column.isNotNull()
    if isinstance(given, ComparisonCondition):
        column, value = F.col(given.column.name), given.parameter
        compare = {
            Operator.EQUAL: operator.eq,
            Operator.NOT_EQUAL: operator.ne,
            Operator.LESS_THAN: operator.lt,
            Operator.LESS_THAN_OR_EQUAL: operator.le,
            Operator.GREATER_THAN: operator.gt,
            Operator.GREATER_THAN_OR_EQUAL: operator.ge,
        }.get(given.operator)
        if compare is not None:
            return compare(column, value)
        if given.operator == Operator.IN:
            return column.isin(list(value))
        if given.operator == Operator.NOT_IN:
            return ~column.isin(list(value))
        return False
    if isinstance(given, (AndCondition, OrCondition)):
        parts = [condition(c) for c in given.conditions]
        if any(p is False or p is None for p in parts):
            return False
        join = operator.and_ if isinstance(given, AndCondition) else operator.or_
        return reduce(join, parts)
    return False
