"""Folding micro-batch partials into stored rows: the speed layer's exactly-once rule."""

from __future__ import annotations

import uuid

import datasketches as ds
import pytest

from speed_layer.sink import Writer, checkpoint_id, fold
from views.kinds import KINDS

KINDS_ORDER = ("count", "sum", "max", "min", "hll", "kll")


def _partial(values: list[float], visitors: list[str]) -> list:
    hll = ds.hll_sketch(12, ds.tgt_hll_type.HLL_8)
    for v in visitors:
        hll.update(v)
    kll = ds.kll_doubles_sketch(200)
    for v in values:
        kll.update(v)
    return [
        len(values),
        float(sum(values)),
        max(values),
        min(values),
        bytes(hll.serialize_compact()),
        bytes(kll.serialize()),
    ]


BATCHES = [
    _partial([1.0, 5.0], ["a", "b"]),
    _partial([7.0], ["b", "c"]),
    _partial([-2.0, 3.0, 4.0], ["d"]),
]


def _answers(row: list) -> list:
    return [KINDS[k].answer(KINDS[k].merge([v])) for k, v in zip(KINDS_ORDER, row, strict=True)]


def _fold_all(batches: list[list], replay: int | None = None) -> list:
    stored, fence = None, None
    order = list(enumerate(batches))
    if replay is not None:  # a crash after batch `replay` was written, before its commit
        order.insert(replay + 1, order[replay])
    for batch_id, partial in order:
        merged = fold(KINDS_ORDER, partial, stored, fence, (0, batch_id))
        if merged is not None:
            stored, fence = merged, (0, batch_id)
    assert stored is not None
    return stored


def test_folding_batch_by_batch_equals_merging_them_all():
    folded = _fold_all(BATCHES)
    columns = zip(KINDS_ORDER, *BATCHES, strict=True)
    at_once = [KINDS[k].merge_stored(list(vs)) for k, *vs in columns]
    assert _answers(folded) == _answers(at_once) == [6, 18.0, 7.0, -2.0, 4, 6]
    assert isinstance(folded[4], bytes) and isinstance(folded[5], bytes)


@pytest.mark.parametrize("replayed", [0, 1, 2])
def test_a_replayed_batch_changes_nothing(replayed: int):
    assert _answers(_fold_all(BATCHES, replay=replayed)) == _answers(_fold_all(BATCHES))


def test_another_checkpoint_replaces_what_an_earlier_run_wrote():
    stored = _fold_all(BATCHES)
    fresh = fold(KINDS_ORDER, BATCHES[0], stored, (0, 2), (1, 0))
    assert _answers(fresh) == _answers(BATCHES[0])
    assert checkpoint_id("/cp/speed/views") != checkpoint_id("/cp/speed.r1/views")


def test_a_checkpoint_created_again_at_the_same_path_is_a_new_run():
    """Its batch ids start at 0 again: the old run's rows are replaced, never added to or
    kept as if the new batches had been written already."""
    path = checkpoint_id("/cp/speed/views")
    lost, again = Writer(uuid.uuid4(), 0, path), Writer(uuid.uuid4(), 0, path)
    stored = _fold_all(BATCHES)  # the lost checkpoint's run wrote batches 0..2
    stored_fence = again.stored_fence(run_id=lost.run, checkpoint=path, batch_id=2)
    first = fold(KINDS_ORDER, BATCHES[0], stored, stored_fence, again.fence)
    assert _answers(first) == _answers(BATCHES[0])  # not dropped as "batch 0 already written"
    later = Writer(again.run, 3, path)
    second = fold(KINDS_ORDER, BATCHES[1], first, again.fence, later.fence)
    assert _answers(second) == _answers(_fold_all(BATCHES[:2]))


def test_a_row_written_before_rows_carried_their_run_is_fenced_by_its_checkpoint():
    path = checkpoint_id("/cp/speed/views")
    writer = Writer(uuid.uuid4(), 3, path)
    stored = _fold_all(BATCHES[:2])
    mine = writer.stored_fence(run_id=None, checkpoint=path, batch_id=3)
    assert fold(KINDS_ORDER, BATCHES[2], stored, mine, writer.fence) is None  # batch 3 replayed
    other = writer.stored_fence(run_id=None, checkpoint=checkpoint_id("/cp/x/views"), batch_id=9)
    assert _answers(fold(KINDS_ORDER, BATCHES[2], stored, other, writer.fence)) == _answers(
        BATCHES[2]
    )
