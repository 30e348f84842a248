"""The one pass gives the summary GX gives, expectation by expectation.

Each case is one expectation over a few rows chosen at its edges (nulls, the
bounds themselves, strict bounds, nested fields, row conditions, ``mostly``,
duplicates with missing values, more unexpected rows than a report lists,
empty tables); GX runs it alone, :func:`validate_dataframe` runs it as the
gates do, and the two summaries must be equal: verdict, statistics, and for a
failure the unexpected count, percent and values, the column mismatch or
GX's error. The full ``BASIC`` result is compared too. What the one pass does
not translate is left to GX, in the same call, and the cases say which.
"""

from __future__ import annotations

import copy

import pytest
from great_expectations import expectations as E
from great_expectations.expectations.row_conditions import Column

from core.frames import local_frame
from data_contracts.derive import validate_dataframe, validate_dataframes, validate_with_gx
from data_contracts.derive.one_pass_query import count_suites

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
    (
        "not null: mostly met",
        E.ExpectColumnValuesToNotBeNull(column="a", mostly=0.5),
        [("x", 1, 0.0, None, None), (None, 2, 0.0, None, None)],
    ),
    (
        "between: mostly not met",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, mostly=0.9),
        [("x", -1, 0.0, None, None), ("x", 2, 0.0, None, None), ("x", None, 0.0, None, None)],
    ),
    (
        "in set: seven outside, five listed",
        E.ExpectColumnValuesToBeInSet(column="a", value_set=["x"]),
        [(v, 0, 0.0, None, None) for v in ["x", "b", None, "c", "d", "e", "f", "g", "h"]],
    ),
    (
        "not in set",
        E.ExpectColumnValuesToNotBeInSet(column="a", value_set=["x"]),
        [("x", 0, 0.0, None, None), ("y", 0, 0.0, None, None), (None, 0, 0.0, None, None)],
    ),
    (
        "in set: numbers",
        E.ExpectColumnValuesToBeInSet(column="n", value_set=[1, 2]),
        [("x", 1, 0.0, None, None), ("x", 3, 0.0, None, None)],
    ),
    (
        "not match regex",
        E.ExpectColumnValuesToNotMatchRegex(column="a", regex="^a"),
        [("abc", 0, 0.0, None, None), ("bcd", 0, 0.0, None, None)],
    ),
    (
        "be null",
        E.ExpectColumnValuesToBeNull(column="t"),
        [("x", 0, 0.0, None, None), ("x", 0, 0.0, None, "set")],
    ),
    (
        "lengths: equal",
        E.ExpectColumnValueLengthsToEqual(column="a", value=2),
        [("ab", 0, 0.0, None, None), ("abc", 0, 0.0, None, None)],
    ),
    (
        "unique: one column repeated, nulls left out",
        E.ExpectColumnValuesToBeUnique(column="a"),
        [(v, 0, 0.0, None, None) for v in ["x", "x", "y", None, None]],
    ),
    (
        "unique: any value missing ignored",
        E.ExpectCompoundColumnsToBeUnique(
            column_list=["a", "n"], ignore_row_if="any_value_is_missing"
        ),
        [("x", None, 0.0, None, None), ("x", None, 0.0, None, None), ("y", 1, 0.0, None, None)],
    ),
    (
        "unique: condition",
        E.ExpectColumnValuesToBeUnique(column="a", row_condition=Column("n") == 1),
        [("x", 1, 0.0, None, None), ("x", 2, 0.0, None, None), ("x", 1, 0.0, None, None)],
    ),
    (
        "between: failed with a condition",
        E.ExpectColumnValuesToBeBetween(column="n", max_value=3, row_condition=Column("a") == "x"),
        [("x", 5, 0.0, None, None), ("y", 9, 0.0, None, None), ("x", 1, 0.0, None, None)],
    ),
    ("unique: no rows", E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"]), []),
    ("in set: no rows", E.ExpectColumnValuesToBeInSet(column="a", value_set=["x"]), []),
    (
        "row count: between",
        E.ExpectTableRowCountToBeBetween(min_value=1, max_value=2),
        [("x", 0, 0.0, None, None)] * 3,
    ),
    (
        "row count: equal",
        E.ExpectTableRowCountToEqual(value=3),
        [("x", 0, 0.0, None, None)] * 3,
    ),
    ("row count: none", E.ExpectTableRowCountToBeBetween(min_value=1), []),
    (
        "min: below",
        E.ExpectColumnMinToBeBetween(column="n", min_value=0),
        [("x", -2, 0.0, None, None), ("x", None, 0.0, None, None)],
    ),
    ("min: no rows", E.ExpectColumnMinToBeBetween(column="n", min_value=0), []),
    (
        "max: strict",
        E.ExpectColumnMaxToBeBetween(column="d", max_value=2.5, strict_max=True),
        [("x", 0, 2.5, None, None)],
    ),
    (
        "mean",
        E.ExpectColumnMeanToBeBetween(column="n", min_value=1, max_value=1.5),
        [("x", 1, 0.0, None, None), ("x", 2, 0.0, None, None)],
    ),
    (
        "sum of integers",
        E.ExpectColumnSumToBeBetween(column="n", max_value=10),
        [("x", 7, 0.0, None, None), ("x", 4, 0.0, None, None)],
    ),
    (
        "unique value count",
        E.ExpectColumnUniqueValueCountToBeBetween(column="a", min_value=3),
        [(v, 0, 0.0, None, None) for v in ["x", "y", "y", None]],
    ),
    (
        "unique proportion",
        E.ExpectColumnProportionOfUniqueValuesToBeBetween(column="a", min_value=0.9),
        [(v, 0, 0.0, None, None) for v in ["x", "y", "y", None]],
    ),
    # Left to GX: a type with no rule, bounds of another type, a missing column, GX's own error.
    (
        "median",
        E.ExpectColumnMedianToBeBetween(column="n", max_value=1),
        [("x", 1, 0.0, None, None), ("x", 5, 0.0, None, None), ("x", 7, 0.0, None, None)],
    ),
    (
        "between: a string column",
        E.ExpectColumnValuesToBeBetween(column="a", min_value=0),
        [("b", 0, 0.0, None, None), ("z", 0, 0.0, None, None)],
    ),
    (
        "between: min above max",
        E.ExpectColumnValuesToBeBetween(column="n", min_value=5, max_value=1),
        [("x", 3, 0.0, None, None)],
    ),
]

LEFT_TO_GX = {"missing column", "median", "between: a string column", "between: min above max"}


@pytest.mark.parametrize(("name", "expectation", "rows"), CASES, ids=[c[0] for c in CASES])
def test_the_one_pass_reports_what_gx_reports(spark, name, expectation, rows):
    import great_expectations as gx

    df = local_frame(spark, rows, SCHEMA)
    suite = gx.ExpectationSuite(name="case", expectations=[expectation])
    fast, judged = validate_dataframe(df, suite), validate_with_gx(df, suite)
    assert fast == judged, (str(fast), str(judged))
    engine = "gx" if name in LEFT_TO_GX else "one_pass"
    assert fast.engines[engine] == 1, fast.engines


@pytest.mark.parametrize(
    ("name", "expectation", "rows"),
    [c for c in CASES if c[0] not in LEFT_TO_GX],
    ids=[c[0] for c in CASES if c[0] not in LEFT_TO_GX],
)
def test_the_whole_basic_result_is_gx_s(spark, name, expectation, rows):
    df = local_frame(spark, rows, SCHEMA)
    (counted,) = count_suites([(df, [expectation])])
    verdict = counted.results[0]
    expected = _gx_basic(df, expectation)
    assert verdict["success"] == expected.success
    assert verdict["result"] == expected.result


def _gx_basic(df, expectation):
    """GX's result for one expectation, ``BASIC`` with five unexpected values."""
    import great_expectations as gx

    context = gx.get_context(mode="ephemeral")
    source = context.data_sources.add_spark("frame", persist=False)
    batch = (
        source.add_dataframe_asset("rows")
        .add_batch_definition_whole_dataframe("all")
        .get_batch(batch_parameters={"dataframe": df})
    )
    details = {"result_format": "BASIC", "partial_unexpected_count": 5}
    return batch.validate(expectation, result_format=details)


def test_what_the_one_pass_cannot_translate_gx_judges_in_the_same_call(spark):
    import great_expectations as gx

    rows = [("x", 1, 0.0, None, None), (None, 5, 0.0, None, None), ("y", 9, 0.0, None, None)]
    df = local_frame(spark, rows, SCHEMA)
    median = E.ExpectColumnMedianToBeBetween(column="n", max_value=2, meta={"rule": "median"})
    expectations = [
        E.ExpectColumnValuesToNotBeNull(column="a", meta={"rule": "required"}),
        median,
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, meta={"rule": "minimum"}),
    ]
    suite = gx.ExpectationSuite(name="mixed", expectations=expectations)
    fast = validate_dataframe(df, suite)
    assert fast.engines == {"one_pass": 2, "gx": 1}
    # The median (which no rule translates) failed, and only GX could have said so.
    assert [f.meta["rule"] for f in fast.failures] == ["required", "median"]
    assert fast == validate_with_gx(df, suite)


def test_failures_are_listed_in_gx_s_order(spark):
    """GX lists what raised first, then groups the rest by column; the one pass, alone or
    with GX judging some of the suite, lists its failures the same way."""
    import great_expectations as gx

    rows = [("x", -1, 0.0, None, None), ("x", -1, 0.0, None, None), (None, 9, 0.0, None, None)]
    df = local_frame(spark, rows, SCHEMA)
    expectations = [
        E.ExpectColumnValuesToNotBeNull(column="a", meta={"rule": "a required"}),
        E.ExpectColumnValuesToBeBetween(column="n", min_value=0, meta={"rule": "n minimum"}),
        E.ExpectColumnMedianToBeBetween(column="n", max_value=-5, meta={"rule": "n median"}),
        E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"], meta={"rule": "key"}),
        E.ExpectColumnValuesToBeBetween(column="d", min_value=5, max_value=1, meta={"rule": "d"}),
        E.ExpectColumnValuesToBeInSet(column="a", value_set=["y"], meta={"rule": "a enum"}),
    ]
    for chosen in (
        expectations,
        [e for e in expectations if e.meta["rule"] in {"a required", "key", "a enum"}],
    ):
        suite = gx.ExpectationSuite(name="order", expectations=[copy.copy(e) for e in chosen])
        fast, judged = validate_dataframe(df, suite), validate_with_gx(df, suite)
        assert [f.meta["rule"] for f in fast.failures] == [f.meta["rule"] for f in judged.failures]
        assert fast == judged
    assert [f.meta["rule"] for f in fast.failures] == ["a required", "a enum", "key"]


def test_a_suite_parameter_is_left_to_gx(spark):
    from data_contracts.derive.one_pass import translate

    schema = local_frame(spark, [], SCHEMA).schema
    bound = E.ExpectColumnValuesToBeBetween(column="n", min_value={"$PARAMETER": "low"})
    assert translate(bound, schema) is None
    assert translate(E.ExpectColumnValuesToBeBetween(column="n", min_value=0), schema) is not None


def test_a_query_that_fails_at_run_time_leaves_the_suite_to_gx(spark):
    import great_expectations as gx

    df = local_frame(spark, [("x", 1, 0.0, None, None)], SCHEMA)
    # An unbalanced pattern: Spark compiles it when the rows are read, and raises.
    regex = E.ExpectColumnValuesToMatchRegex(column="a", regex="(x")
    suite = gx.ExpectationSuite(name="broken", expectations=[regex])
    fast, judged = validate_dataframe(df, suite), validate_with_gx(df, suite)
    assert fast == judged and not fast.success
    assert fast.engines == {"one_pass": 0, "gx": 1}


def test_the_spark_jobs_do_not_grow_with_the_expectations(spark):
    """Two rules or thirty-one, one aggregation (plus one grouping for the uniqueness)."""
    import great_expectations as gx

    rows = [(f"v{i}", i, float(i), (i,), "t") for i in range(50)]
    df = local_frame(spark, rows, SCHEMA)
    few = [E.ExpectColumnValuesToNotBeNull(column="a")]
    many = few + [
        E.ExpectColumnValuesToBeBetween(column=c, min_value=-i)
        for c in ("n", "d", "s.x")
        for i in range(10)
    ]
    unique = [E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"])]
    jobs = {}
    for label, expectations in {
        "few": few,
        "many": many,
        "few+unique": few + unique,
        "many+unique": many + unique,
    }.items():
        suite = gx.ExpectationSuite(name=label, expectations=expectations)
        summary, jobs[label] = _jobs_of(spark, f"one-pass-{label}", validate_dataframe, df, suite)
        assert summary.success and summary.engines["gx"] == 0
    assert jobs["few"] == jobs["many"] and jobs["few+unique"] == jobs["many+unique"], jobs


def _jobs_of(spark, group: str, call, *args):
    """``call(*args)`` and the Spark jobs it ran, counted in a job group of its own: a job
    another thread of this process runs meanwhile (a test's stream) is not counted."""
    context = spark.sparkContext
    context.setJobGroup(group, group)
    try:
        result = call(*args)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    return result, len(context.statusTracker().getJobIdsForGroup(group))


def test_several_tables_in_one_query_report_as_each_alone(spark):
    import great_expectations as gx

    one = local_frame(spark, [("x", -1, 0.0, None, None)], SCHEMA)
    two = local_frame(spark, [("x", 1, 0.0, None, None), ("x", 1, 0.0, None, None)], SCHEMA)
    between = E.ExpectColumnValuesToBeBetween(column="n", min_value=0)
    unique = E.ExpectCompoundColumnsToBeUnique(column_list=["a", "n"])
    suites = [
        gx.ExpectationSuite(name="one", expectations=[between]),
        gx.ExpectationSuite(name="two", expectations=[unique]),
    ]
    together = validate_dataframes([(one, suites[0]), (two, suites[1])])
    assert together == [validate_with_gx(one, suites[0]), validate_with_gx(two, suites[1])]
    assert [s.success for s in together] == [False, False]
