"""Measure kinds: one table every layer reads; Spark and Python merge every kind alike.

A view with one measure of every kind (including ``min``, added as one entry
of ``views.kinds.KINDS``) goes through each place a kind matters: the Spark
merge and answer columns, serving's Python merge, its generated row
formatter and its top-N ranking, the Spark schema of the SQL views, the gold
quality suite. Sketch answers are estimates in both languages of the same
DataSketches bytes, so they agree exactly.
"""

from __future__ import annotations

from typing import get_args

import pytest

from core.frames import local_frame
from views import ViewSpec, estimates, merge_partials
from views.kinds import KINDS, MeasureKind, kind, quantile_name
from views.spec import Measure

QUANTILES = (0.5, 0.9)
MEASURES = (
    Measure("events", "count"),
    Measure("total", "sum"),
    Measure("largest", "max"),
    Measure("smallest", "min"),
    Measure("visitors", "hll"),
    Measure("spread", "kll"),
)


def _build(events):
    from pyspark.sql import functions as F

    value = F.col("value")
    return (
        events.groupBy(F.window("event_time", "1 minute").alias("window"), "key")
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.sum(value).alias("total"),
            F.max(value).alias("largest"),
            F.min(value).alias("smallest"),
            F.hll_sketch_agg("visitor", 12).alias("visitors"),
            F.kll_sketch_agg_double(value).alias("spread"),
        )
        .select(F.col("window.start").alias("window_start"), "key", *(m.name for m in MEASURES))
    )


SPEC = ViewSpec("every_kind", ("key",), MEASURES, _build, "One measure of every kind.")

EVENTS = [
    # (minute, key, visitor, value)
    (0, "a", "u1", 3.0),
    (0, "a", "u2", -1.5),
    (0, "b", "u1", 8.0),
    (1, "a", "u1", 4.0),
    (1, "a", "u3", 0.25),
    (2, "b", "u4", 2.0),
    (2, "a", "u5", 7.5),
]


def test_the_kinds_type_and_the_table_agree():
    assert get_args(MeasureKind) == tuple(KINDS)
    for name, entry in KINDS.items():
        assert entry.name == name
        assert entry.description
        assert entry.cql_type in ("bigint", "double", "blob")
        assert (entry.cql_type == "blob") == entry.sketch == (entry.spark_type == "binary")
        assert entry.quantiles == (entry.quantile is not None)
    assert kind("min").rank_label == "min"
    with pytest.raises(ValueError, match="the kinds are: count, sum, max, min, hll, kll"):
        kind("avg")


def test_answer_names_follow_the_kind():
    assert kind("min").answer_names("smallest", QUANTILES) == ["smallest"]
    assert kind("kll").answer_names("spread", QUANTILES) == [
        "spread_n",
        quantile_name("spread", 0.5),
        "spread_p90",
    ]


@pytest.fixture(scope="module")
def partials(spark):
    from pyspark.sql import functions as F

    rows = [(f"2026-01-01 00:0{m}:10", k, v, x) for m, k, v, x in EVENTS]
    events = local_frame(spark, rows, "t string, key string, visitor string, value double")
    events = events.withColumn("event_time", F.col("t").cast("timestamp")).drop("t")
    return SPEC.build(events).cache()


@pytest.mark.slow
def test_spark_and_python_merge_every_kind_alike(partials):
    from serving.merge import summarise

    spark_answer = estimates(
        merge_partials(partials, SPEC, keys=()), SPEC, quantiles=QUANTILES
    ).collect()
    assert len(spark_answer) == 1
    rows = [tuple(r[m.name] for m in MEASURES) for r in partials.collect()]
    python_answer = summarise(MEASURES, rows, QUANTILES)
    assert python_answer == spark_answer[0].asDict()
    assert python_answer["smallest"] == -1.5
    assert python_answer["largest"] == 8.0
    assert python_answer["events"] == len(EVENTS)
    assert python_answer["visitors"] == 5
    assert python_answer["spread_n"] == len(EVENTS)


@pytest.mark.slow
def test_one_row_formats_and_ranks_as_it_merges(partials):
    from serving.merge import rank_value, row_formatter, summarise

    fmt = row_formatter(MEASURES, QUANTILES)
    for row in partials.collect():
        values = tuple(row[m.name] for m in MEASURES)
        assert fmt(values) == summarise(MEASURES, [values], QUANTILES)
    assert fmt(None) == summarise(MEASURES, [], QUANTILES)
    assert fmt(None)["smallest"] is None

    by_key: dict[str, list] = {}
    for row in partials.collect():
        by_key.setdefault(row["key"], []).append(row["smallest"])
    smallest = {k: rank_value(MEASURES[3], v, 0.5) for k, v in by_key.items()}
    assert smallest == {"a": (-1.5, 3), "b": (2.0, 2)}


def test_every_layer_types_and_checks_a_kind_from_the_table():
    from batch_layer.quality import view_suite
    from serving.sql import view_schema

    types = {f.name: f.dataType.simpleString() for f in view_schema(SPEC).fields}
    assert types == {
        "window_start": "timestamp",
        "key": "string",
        "events": "bigint",
        "total": "double",
        "largest": "double",
        "smallest": "double",
        "visitors": "binary",
        "spread": "binary",
    }
    not_negative = {
        e.column for e in view_suite(SPEC).expectations if e.meta["rule"] == "not negative"
    }
    assert not_negative == {"events", "total", "largest"}, "a minimum may be below zero"
