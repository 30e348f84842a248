"""What the progress recorder counts per micro-batch, and how the counts add up across batches."""

from __future__ import annotations

from types import SimpleNamespace

from speed_layer.job import EDGE_METRICS, REJECT_METRICS, reject_metric
from speed_layer.progress import add_counts, batch_counts
from views.input import REJECT_REASONS


def _progress(late: tuple[int, ...] = (), edge=None, rejects=None) -> SimpleNamespace:
    observed = {}
    if edge is not None:
        observed[EDGE_METRICS] = edge
    if rejects is not None:
        observed[REJECT_METRICS] = {reject_metric(r): rejects.get(r, 0) for r in REJECT_REASONS}
    operators = [SimpleNamespace(numRowsDroppedByWatermark=n) for n in late]
    return SimpleNamespace(stateOperators=operators, observedMetrics=observed or None)


def test_a_batch_counts_late_future_before_floor_and_rejects_per_reason():
    progress = _progress(
        late=(2, 3),
        edge={"future_rows": 1, "before_floor_rows": None},
        rejects={"unparseable": 4, "missing:timestamp": 1},
    )
    assert batch_counts(progress) == {
        "late_rows_dropped": 5,
        "future_rows_dropped": 1,
        "before_floor_rows": 0,
        "rejected_rows": {"unparseable": 4, "missing:timestamp": 1},
    }


def test_a_batch_without_observed_metrics_counts_nothing_dropped():
    assert batch_counts(_progress()) == {
        "late_rows_dropped": 0,
        "future_rows_dropped": 0,
        "before_floor_rows": 0,
        "rejected_rows": {},
    }


def test_counts_add_up_across_batches_and_restarts():
    restored = {"late_rows_dropped": 7, "future_rows_dropped": None, "rejected_rows": None}
    first = add_counts(restored, batch_counts(_progress(late=(1,), rejects={"unparseable": 2})))
    second = add_counts(
        first,
        batch_counts(_progress(rejects={"unparseable": 1, "invalid:timestamp_future": 3})),
    )
    assert second == {
        "late_rows_dropped": 8,
        "future_rows_dropped": 0,
        "before_floor_rows": 0,
        "rejected_rows": {"unparseable": 3, "invalid:timestamp_future": 3},
    }
    assert first["rejected_rows"] == {"unparseable": 2}, "adding does not change an earlier total"


def test_reject_metrics_are_plain_names():
    assert [reject_metric(r) for r in REJECT_REASONS] == [
        "unparseable",
        "missing_event_id",
        "missing_timestamp",
        "invalid_timestamp_future",
    ]
