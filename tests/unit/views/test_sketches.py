"""Spark's sketch bytes read by the datasketches package: same answers without Spark."""

from __future__ import annotations

from collections import defaultdict

import pytest
from pyspark.sql import functions as F

from views import merge_partials, view
from views.sketches import hll_union, kll_n, kll_quantile

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page_rows(runner, simulation):
    """page_activity minute rows of the simulated run, sketches as bytes, per path."""
    spec = view("page_activity")
    minutes = spec.build(runner.events(simulation.source))
    per_path: defaultdict[str, list] = defaultdict(list)
    for row in minutes.collect():
        per_path[row["path"]].append(row)
    merged = merge_partials(minutes, spec).select(
        "path",
        "load_count",
        F.hll_sketch_estimate("visitors").alias("visitors"),
        *(
            F.kll_sketch_get_quantile_double("load_sketch", F.lit(q)).alias(f"p{q}")
            for q in (0.0, 0.5, 0.95, 1.0)
        ),
    )
    return per_path, {row["path"]: row for row in merged.collect()}


def test_python_merges_agree_with_spark_merges(page_rows):
    per_path, spark_merged = page_rows
    assert len(per_path) > 10
    for path, rows in per_path.items():
        expected = spark_merged[path]
        visitors = [row["visitors"] for row in rows]
        loads = [row["load_sketch"] for row in rows]
        assert round(hll_union(visitors)) == expected["visitors"], path
        assert kll_n(loads) == expected["load_count"], path
        for q in (0.0, 0.5, 0.95, 1.0):
            assert kll_quantile(loads, q) == expected[f"p{q}"], (path, q)


def test_no_values_and_bad_ranks():
    assert hll_union([]) == 0.0
    assert hll_union([None]) == 0.0
    assert kll_n([None]) == 0
    assert kll_quantile([], 0.5) is None
    with pytest.raises(ValueError, match=r"q must lie in \[0, 1\]; got 95"):
        kll_quantile([], 95)


def test_empty_spark_sketches_hold_no_values(spark, page_rows):
    """Spark writes an empty (not null) KLL sketch when a window has no load time."""
    empty = spark.range(2).select(F.kll_sketch_agg_double(F.lit(None).cast("double"))).first()[0]
    assert empty is not None
    assert kll_n([empty]) == 0
    assert kll_quantile([empty], 0.5) is None
    per_path, _ = page_rows
    one = next(row for rows in per_path.values() for row in rows if row["load_count"] == 1)
    assert kll_quantile([empty, one["load_sketch"], empty], 0.5) == one["load_max"]
