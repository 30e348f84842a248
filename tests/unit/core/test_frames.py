"""``local_frame`` holds what ``createDataFrame`` holds, and its queries start no Python."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from pyspark.sql import Row

from core.frames import local_frame

SCHEMA = (
    "a string, n int, big bigint, d double, dec decimal(10,2), b binary, day date,"
    " at timestamp, s struct<x: int, y: array<string>>, m map<string, bigint>, xs array<int>"
)
ROWS = [
    (
        "x",
        1,
        2**40,
        0.5,
        Decimal("1.25"),
        b"\x00\x01",
        date(2026, 1, 2),
        datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
        (7, ["p", None]),
        {"k": 3},
        [1, None],
    ),
    (None, None, None, None, None, None, None, datetime(2026, 1, 2, 3), None, None, None),
    Row(
        a="r",
        n=-1,
        big=0,
        d=-0.0,
        dec=None,
        b=b"",
        day=None,
        at=None,
        s=Row(x=None, y=[]),
        m={},
        xs=[],
    ),
]


def test_a_local_frame_holds_what_create_data_frame_holds(spark):
    ours = local_frame(spark, ROWS, SCHEMA)
    theirs = spark.createDataFrame(ROWS, SCHEMA)
    assert ours.schema == theirs.schema
    assert ours.collect() == theirs.collect()


def test_rows_as_dicts_and_an_empty_frame(spark):
    assert local_frame(spark, [{"n": 1}, {"a": "y"}], "a string, n int").collect() == [
        Row(a=None, n=1),
        Row(a="y", n=None),
    ]
    empty = local_frame(spark, [], "a string")
    assert empty.count() == 0 and empty.columns == ["a"]


def test_a_row_of_the_wrong_length_is_refused(spark):
    with pytest.raises(ValueError, match=r"shorter|longer"):
        local_frame(spark, [("x", 1, "extra")], "a string, n int")


def test_queries_over_it_start_no_python_worker(spark):
    """The JVM reads the rows: a query over them runs no Python (a pickled frame's does)."""
    python_stages = _python_stages(spark, spark.createDataFrame([("x",)], "a string"))
    assert python_stages > 0  # the measure sees a Python worker where there is one
    assert _python_stages(spark, local_frame(spark, [("x",)], "a string")) == 0


def _python_stages(spark, frame) -> int:
    """How many of the plan's RDDs run Python: ``PythonRDD`` in the executed lineage."""
    lineage = frame.groupBy("a").count()._jdf.queryExecution().toRdd().toDebugString()
    return lineage.count("PythonRDD")
