"""Folding micro-batch partials into stored rows: the speed layer's exactly-once rule."""

from __future__ import annotations

import datasketches as ds
import pytest

from speed_layer.sink import checkpoint_id, fold
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
