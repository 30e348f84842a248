"""Merging partial rows the way every measure kind says: in plain Python with DataSketches."""

from __future__ import annotations

import datasketches as ds
import pytest

from serving.merge import hll_estimate, measure_names, rank_value, summarise
from views import view
from views.common import HLL_LG_K

PAGE = view("page_activity")


def _hll(ids) -> bytes:
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    for i in ids:
        sketch.update(str(i))
    return sketch.serialize_compact()


def _kll(values) -> bytes:
    sketch = ds.kll_doubles_sketch(200)
    for v in values:
        sketch.update(float(v))
    return sketch.serialize()


def _row(views: int, ids, loads) -> tuple:
    loads = list(loads)
    return (
        views,
        _hll(ids),
        len(loads),
        float(sum(loads)) if loads else None,
        float(max(loads)) if loads else None,
        _kll(loads) if loads else None,
    )


def test_counts_add_maxima_max_sketches_union() -> None:
    rows = [_row(3, range(0, 100), [100, 200]), _row(5, range(50, 150), [300])]
    out = summarise(PAGE.measures, rows)
    assert out["page_views"] == 8
    assert out["load_count"] == 3
    assert out["load_sum"] == 600.0
    assert out["load_max"] == 300.0
    assert abs(out["visitors"] - 150) <= 3  # union, not 200
    assert out["load_sketch_n"] == 3
    assert out["load_sketch_p50"] == 200.0
    assert out["load_sketch_p95"] == 300.0


def test_no_rows_give_zeros_and_nulls() -> None:
    out = summarise(PAGE.measures, [])
    assert out == {
        "page_views": 0,
        "visitors": 0,
        "load_count": 0,
        "load_sum": None,
        "load_max": None,
        "load_sketch_n": 0,
        "load_sketch_p50": None,
        "load_sketch_p95": None,
    }
    assert list(out) == measure_names(PAGE.measures, (0.5, 0.95))


def test_windows_without_load_times_merge_with_ones_that_have_them() -> None:
    out = summarise(PAGE.measures, [_row(2, [1], []), _row(1, [2], [50])])
    assert (out["load_count"], out["load_sum"], out["load_max"]) == (1, 50.0, 50.0)


def test_hll_estimate_has_bounds_around_the_truth() -> None:
    sketches = [_hll(range(i * 1000, i * 1000 + 1500)) for i in range(10)]
    estimate = hll_estimate([*sketches, None])
    truth = 10_500
    assert estimate.lower <= truth <= estimate.upper
    assert abs(estimate.estimate - truth) / truth < 0.05
    assert hll_estimate([]) == (0.0, 0.0, 0.0)


def test_rank_values_per_kind() -> None:
    assert rank_value(PAGE.measure("page_views"), [1, 2, None], 0.95) == (3.0, 3)
    assert rank_value(PAGE.measure("load_max"), [1.0, 7.0], 0.95) == (7.0, 2)
    p95, n = rank_value(PAGE.measure("load_sketch"), [_kll(range(1, 101)), None], 0.95)
    assert n == 100 and p95 == pytest.approx(95, abs=2)
    assert rank_value(PAGE.measure("load_sketch"), [None], 0.95) == (None, 0)
    assert rank_value(PAGE.measure("load_sum"), [None], 0.95) == (None, 1)
