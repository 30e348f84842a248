"""The one-pass verdict agrees with GX on every expectation it counts.

Each case is one expectation over a few rows chosen at its edges (nulls, the
bounds themselves, strict bounds, nested fields, row conditions, duplicates with
missing values); GX runs it alone, the one pass counts it, and the two must
agree: no unexpected row exactly when GX says it passed. What the one pass does
not translate is left to GX, and then the suite's verdict is GX's.
"""

from __future__ import annotations

import pytest
from great_expectations import expectations as E
from great_expectations.expectations.row_conditions import Column

from data_contracts.derive import validate_dataframe, validate_with_gx
from data_contracts.derive.expectations import _column_paths
from data_contracts.derive.one_pass import count_unexpected

SCHEMA = "a string, n int, d double, s struct<x: int>, t string"

# (name, expectation, rows); every row is (a, n, d, s, t).
CASES = [
    (
        "not null: none missing",
        E.ExpectColumnValuesToNotBeNull(column="a"),
        [("x", 1, 1.0, (1,), "t")],
    ),
    (
        "not null: one missing",
        E.ExpectColumnValuesToNotBeNull(column="a"),
        [(None, 1, 1.0, (1,), "t")],
    ),
    ("not null: no rows", E.ExpectColumnValuesToNotBeNull(column="a"), []),
    (
        "between: the bounds",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, max_value=10),
        [("x", 0, 0.0, None, None), ("x", 10, 0.0, None, None), ("x", None, 0.0, None, None)],
    ),
    (
        "between: below",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, max_value=10),
        [("x", -1, 0.0, None, None)],
    ),
    (
        "between: above",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, max_value=10),
        [("x", 11, 0.0, None, None)],
    ),
    (
        "between: strict min at it",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, strict_min=True),
        [("x", 0, 0.0, None, None)],
    ),
    (
        "between: strict max below it",
        E.ExpectColumnValuesToBeBetween(column="n", max_value=5, strict_max=True),
        [("x", 4, 0.0, None, None)],
    ),
    (
        "between: strict max at it",
        E.ExpectColumnValuesToBeBetween(column="n", max_value=5, strict_max=True),
        [("x", 5, 0.0, None, None)],
    ),
    (
        "between: min only",
        E.ExpectColumnValuesToBeBetween(column="d", min_value=0),
        [("x", 0, -1e-9, None, None)],
    ),
    (
        "between: nested field",
        E.ExpectColumnValuesToBeBetween(column="s.x", min_value=0),
        [("x", 0, 0.0, (-3,), None), ("x", 0, 0.0, None, None)],
    ),
    (
        "between: nested field ok",
        E.ExpectColumnValuesToBeBetween(column="s.x", min_value=0),
        [("x", 0, 0.0, (3,), None), ("x", 0, 0.0, None, None)],
    ),
    (
        "lengths: inside",
        E.ExpectColumnValueLengthsToBeBetween(column="a", min_value=1, max_value=3),
        [("abc", 0, 0.0, None, None), (None, 0, 0.0, None, None)],
    ),
    (
        "lengths: empty",
        E.ExpectColumnValueLengthsToBeBetween(column="a", min_value=1, max_value=3),
        [("", 0, 0.0, None, None)],
    ),
    (
        "lengths: too long",
        E.ExpectColumnValueLengthsToBeBetween(column="a", min_value=1, max_value=3),
        [("abcd", 0, 0.0, None, None)],
    ),
    (
        "lengths: max only",
        E.ExpectColumnValueLengthsToBeBetween(column="a", max_value=2),
        [("ab", 0, 0.0, None, None)],
    ),
    (
        "in set: in it",
        E.ExpectColumnValuesToBeInSet(column="a", value_set=["x", "y"]),
        [("x", 0, 0.0, None, None), (None, 0, 0.0, None, None)],
    ),
    (
        "in set: outside",
        E.ExpectColumnValuesToBeInSet(column="a", value_set=["x", "y"]),
        [("z", 0, 0.0, None, None)],
    ),
    (
        "regex: anchored, matches",
        E.ExpectColumnValuesToMatchRegex(column="a", regex="^[a-z]+$"),
        [("abc", 0, 0.0, None, None), (None, 0, 0.0, None, None)],
    ),
    (
        "regex: anchored, does not",
        E.ExpectColumnValuesToMatchRegex(column="a", regex="^[a-z]+$"),
        [("ab1", 0, 0.0, None, None)],
    ),
    (
        "regex: unanchored finds",
        E.ExpectColumnValuesToMatchRegex(column="a", regex="b"),
        [("abc", 0, 0.0, None, None)],
    ),
    (
        "unique: distinct",
        E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"]),
        [("x", 1, 0.0, None, None), ("x", 2, 0.0, None, None)],
    ),
    (
        "unique: repeated",
        E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"]),
        [("x", 1, 0.0, None, None), ("x", 1, 0.0, None, None)],
    ),
    (
        "unique: all missing twice",
        E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"]),
        [(None, None, 0.0, None, None), (None, None, 0.0, None, None)],
    ),
    (
        "unique: one missing twice",
        E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"]),
        [(None, 1, 0.0, None, None), (None, 1, 0.0, None, None)],
    ),
    (
        "condition: met and broken",
        E.ExpectColumnValuesToNotBeNull(column="t", row_condition=Column("a") == "x"),
        [("x", 0, 0.0, None, None)],
    ),
    (
        "condition: not met",
        E.ExpectColumnValuesToNotBeNull(column="t", row_condition=Column("a") == "x"),
        [("y", 0, 0.0, None, None), (None, 0, 0.0, None, None)],
    ),
    (
        "condition: and, null test",
        E.ExpectColumnValuesToNotBeNull(
            column="t", row_condition=(Column("a").is_null()) & (Column("n") == 1)
        ),
        [(None, 1, 0.0, None, None)],
    ),
    (
        "condition: and, not met",
        E.ExpectColumnValuesToNotBeNull(
            column="t", row_condition=(Column("a").is_null()) & (Column("n") == 1)
        ),
        [(None, 2, 0.0, None, None), ("q", 1, 0.0, None, None)],
    ),
    (
        "columns: exact",
        E.ExpectTableColumnsToMatchSet(
            column_set=["a", "n", "d", "s", "s.x", "t"], exact_match=True
        ),
        [("x", 0, 0.0, None, None)],
    ),
    (
        "columns: one missing",
        E.ExpectTableColumnsToMatchSet(column_set=["a", "n", "d", "s", "t"], exact_match=True),
        [("x", 0, 0.0, None, None)],
    ),
    (
        "columns: subset",
        E.ExpectTableColumnsToMatchSet(column_set=["a", "n"], exact_match=False),
        [("x", 0, 0.0, None, None)],
    ),
    ("missing column", E.ExpectColumnValuesToNotBeNull(column="nope"), [("x", 0, 0.0, None, None)]),
]


@pytest.mark.parametrize(("expectation", "rows"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_one_pass_agrees_with_gx(spark, expectation, rows):
    import great_expectations as gx

    df = spark.createDataFrame(rows, SCHEMA)
    suite = gx.ExpectationSuite(name="case", expectations=[expectation])
    judged = validate_with_gx(df, suite)
    counted = count_unexpected(df, suite.expectations, _column_paths(df.schema))
    if counted.left_to_gx:
        assert not counted.all_passed
    else:
        assert (counted.unexpected[0] == 0) == judged.success, (counted, str(judged))
    assert validate_dataframe(df, suite).success == judged.success


def test_what_the_one_pass_cannot_count_is_left_to_gx(spark):
    import great_expectations as gx

    df = spark.createDataFrame([("x", 1, 0.0, None, None), (None, 2, 0.0, None, None)], SCHEMA)
    mostly = E.ExpectColumnValuesToNotBeNull(column="a", mostly=0.5)
    suite = gx.ExpectationSuite(name="mostly", expectations=[mostly])
    counted = count_unexpected(df, suite.expectations, _column_paths(df.schema))
    assert counted.left_to_gx == (0,) and not counted.all_passed
    assert validate_dataframe(df, suite).success  # GX's verdict: half the rows is enough


def test_a_passing_suite_reports_what_gx_reports(spark):
    import great_expectations as gx

    df = spark.createDataFrame([("x", 1, 0.0, (1,), "t")], SCHEMA)
    suite = gx.ExpectationSuite(name="ok", expectations=[c[1] for c in CASES[:1] + CASES[3:4]])
    fast, judged = validate_dataframe(df, suite), validate_with_gx(df, suite)
    assert fast.success and judged.success
    assert fast.statistics == judged.statistics
