"""Comparing a view's batch rows with its speed rows: the rules per measure kind, pure."""

from __future__ import annotations

from datetime import UTC, datetime

import datasketches as ds
import pytest

from batch_layer.drift import (
    EXAMPLES,
    HLL_TOLERANCE,
    ViewDrift,
    compare_row,
    report_markdown,
)
from views import view

PAGES = view("page_activity")
CLICKS = view("clicks")
W = int(datetime(2026, 11, 23, 10, 0, tzinfo=UTC).timestamp() * 1000)
MINUTE = 60_000


def _hll(ids, parts: int = 1) -> bytes:
    """An HLL sketch of ``ids`` as Spark writes it (one pass), or the union of ``parts``
    sketches of them as the speed layer folds micro-batches."""
    if parts == 1:
        sketch = ds.hll_sketch(12, ds.tgt_hll_type.HLL_8)
        for i in ids:
            sketch.update(i)
        return bytes(sketch.serialize_compact())
    union = ds.hll_union(12)
    for p in range(parts):
        sketch = ds.hll_sketch(12, ds.tgt_hll_type.HLL_8)
        for i in ids[p::parts]:
            sketch.update(i)
        union.update(sketch)
    return bytes(union.get_result(ds.tgt_hll_type.HLL_8).serialize_compact())


def _kll(values, parts: int = 1) -> bytes:
    merged = None
    for p in range(parts):
        sketch = ds.kll_doubles_sketch(200)
        for v in values[p::parts]:
            sketch.update(v)
        if merged is None:
            merged = sketch
        else:
            merged.merge(sketch)
    return bytes(merged.serialize())


def _page(views=3, ids=("a", "b"), loads=(100.0, 250.0), parts=1):
    """A stored page_activity row: page_views, visitors, load_count, load_sum, load_max,
    load_sketch."""
    return (
        views,
        _hll(list(ids), parts),
        len(loads),
        sum(loads),
        max(loads) if loads else None,
        _kll(list(loads), parts),
    )


def test_equal_rows_from_one_pass_and_from_micro_batches_do_not_differ():
    """Sketches built in parts (the speed layer) equal one pass (batch): the register
    estimates match exactly, even where the sketches' own estimates differ (HIP vs
    composite), and KLL sketches hold the same number of values."""
    ids = [f"user-{i}" for i in range(20_000)]
    loads = [float(i % 997) for i in range(5_000)]
    batch = _page(views=20_000, ids=ids, loads=loads)
    speed = _page(views=20_000, ids=ids, loads=loads, parts=7)
    one_pass = ds.hll_sketch.deserialize(batch[1]).get_estimate()
    in_parts = ds.hll_sketch.deserialize(speed[1]).get_estimate()
    assert abs(one_pass - in_parts) / one_pass > 0.005  # what comparing estimates would flag
    assert compare_row(PAGES, W, ("/",), batch, speed) is None


@pytest.mark.parametrize(
    ("batch", "speed", "differing"),
    [
        (_page(views=3), _page(views=2), ("page_views",)),
        (_page(loads=(100.0, 250.0)), _page(loads=(100.0, 251.0)), ("load_sum", "load_max")),
        (_page(loads=(100.0, 250.0)), _page(loads=(100.0,)), None),  # count, sum, max, kll n
        (_page(ids=("a", "b")), _page(ids=("a",)), ("visitors",)),
    ],
)
def test_every_measure_kind_is_compared(batch, speed, differing):
    found = compare_row(PAGES, W, ("/",), batch, speed)
    assert found is not None
    if differing is None:
        assert set(found.differing) == {"load_count", "load_sum", "load_max", "load_sketch"}
    else:
        assert found.differing == differing


def test_sums_agree_to_rounding_and_hll_within_its_bound():
    rounding = compare_row(
        PAGES, W, ("/",), (1, None, 3, 0.1 + 0.2 + 0.3, 1.0, None), (1, None, 3, 0.6, 1.0, None)
    )
    assert rounding is None or rounding.differing == ()
    from batch_layer.drift import within

    assert within("hll", 1000.0, 1000.0 * (1 + HLL_TOLERANCE))
    assert not within("hll", 1000.0, 1000.0 * (1 + 2 * HLL_TOLERANCE))


def test_a_row_on_one_side_only_differs_by_all_of_it():
    only_batch = compare_row(CLICKS, W, ("#buy",), (4,), None)
    assert only_batch is not None and only_batch.relative == 1.0
    assert only_batch.batch == {"clicks": 4} and only_batch.speed is None
    assert only_batch.describe().endswith("only in batch")
    only_speed = compare_row(CLICKS, W, ("#buy",), None, (4,))
    assert only_speed is not None and only_speed.describe().endswith("only in speed")


def test_a_view_counts_windows_rows_and_keeps_the_largest_difference():
    drift = ViewDrift("clicks")
    drift.add_window(CLICKS, W, {("a",): (1,), ("b",): (2,)}, {("a",): (1,), ("b",): (2,)})
    drift.add_window(CLICKS, W + MINUTE, {("a",): (4,)}, {("a",): (3,)})
    drift.add_window(CLICKS, W + 2 * MINUTE, {("a",): (5,), ("b",): (1,)}, {("a",): (5,)})
    drift.add_window(CLICKS, W + 3 * MINUTE, {}, {})
    assert (drift.windows_compared, drift.windows_differing) == (4, 2)
    assert (drift.rows_compared, drift.rows_differing) == (5, 2)
    assert drift.differing_windows == [W + MINUTE, W + 2 * MINUTE]
    assert drift.largest is not None and drift.largest.key == ("b",)
    assert drift.largest_difference == 1.0
    assert [e.key for e in drift.examples] == [("a",), ("b",)]


def test_rows_touched_by_late_events_are_skipped_not_compared():
    drift = ViewDrift("clicks")
    drift.add_window(CLICKS, W, {("a",): (5,), ("b",): (1,)}, {("a",): (4,)}, late=[("a",)])
    assert (drift.rows_skipped_late, drift.rows_compared, drift.rows_differing) == (1, 1, 1)
    assert drift.examples[0].key == ("b",)


def test_no_difference_means_a_zero_largest_difference():
    drift = ViewDrift("clicks")
    drift.add_window(CLICKS, W, {("a",): (1,)}, {("a",): (1,)})
    assert drift.largest is None and drift.largest_difference == 0.0
    assert drift.as_dict()["largest_at"] is None


def test_examples_are_capped():
    drift = ViewDrift("clicks")
    batch = {(f"k{i}",): (1,) for i in range(EXAMPLES + 5)}
    drift.add_window(CLICKS, W, batch, {})
    assert drift.rows_differing == EXAMPLES + 5 and len(drift.examples) == EXAMPLES


def test_the_report_names_the_view_the_windows_the_rows_and_what_to_do():
    ok, bad = ViewDrift("site_activity"), ViewDrift("clicks", window_from=W, window_to=W + MINUTE)
    ok.note = "the speed layer reports no watermark for this view"
    bad.add_window(CLICKS, W, {("#buy",): (7,)}, {("#buy",): (6,)})
    checked = datetime(2026, 11, 23, 11, 0, tzinfo=UTC)
    text = report_markdown("web_events", "run-1", checked, [ok, bad], threshold=0)
    assert text.startswith("# Reconciliation of web_events: DRIFT")
    assert "no watermark" in text
    assert "## clicks: 1 of 1 windows differ" in text
    assert "| 2026-11-23T10:00:00Z | #buy | clicks | clicks 7 | clicks 6 |" in text
    assert "python -m speed_layer replay --from earliest" in text
    quiet = report_markdown("web_events", "run-1", checked, [ok], threshold=0)
    assert quiet.startswith("# Reconciliation of web_events: OK")
    assert "What to do" not in quiet
