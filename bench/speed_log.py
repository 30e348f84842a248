"""Where the speed job's micro-batches spend their time, read from its log.

The job logs one ``speed.batch_folded`` line per micro-batch
(:class:`speed_layer.sink.ViewsSink`); ``bench/speed_freshness.py`` reads the
lines a step added.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["fold_stages", "percentile"]


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank; NaN when empty).

    >>> percentile([3, 1, 2], 0.5)
    2
    """
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def fold_stages(log: Path, offset: int) -> dict:
    """Where the step's micro-batches spent their time, from the job's ``speed.batch_folded``
    lines (p50s): the fold of every view (``fold_ms``: the batch's read, parse and dedupe,
    the aggregations, Cassandra reads and writes) and each view's share; the rest of a
    batch's duration is planning, the Kafka offsets and the checkpoint commit. A job that
    also logs ``events`` and ``read_s`` (a count before the views) splits the read off."""
    with log.open("rb") as handle:
        handle.seek(offset)
        lines = handle.read().decode(errors="replace").splitlines()
    folds = []
    for line in lines:
        if '"speed.batch_folded"' in line:
            try:
                folds.append(json.loads(line))
            except ValueError:
                continue
    if not folds:
        return {}
    views = sorted({v for f in folds for v in f.get("views", {})})
    return {
        "events_per_batch_p50": round(percentile([f.get("events", 0) for f in folds], 0.5)),
        "read_ms_p50": round(percentile([f.get("read_s", 0) * 1000 for f in folds], 0.5)),
        "fold_ms_p50": round(percentile([f.get("fold_s", 0) * 1000 for f in folds], 0.5)),
        "fold_view_ms_p50": {
            v: round(percentile([f["views"][v] * 1000 for f in folds if v in f["views"]], 0.5))
            for v in views
        },
    }
