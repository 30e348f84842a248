"""A timeseries' buckets: each key's rows merged into one bucket per step of the range.

Pure computation over rows already read (:meth:`serving.query.Queries.timeseries` reads
them and runs this in a thread, off the event loop).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from serving.merge import measure_names, summarise
from serving.plan import bucket_source
from serving.rules import key_dict
from serving.timerange import iso
from views.spec import Measure, ViewSpec

__all__ = ["series_buckets"]


def series_buckets(
    spec: ViewSpec,
    keys: Sequence[tuple[str, ...]],
    found: Sequence[list[tuple]],
    span: tuple[int, int],
    boundary: int | None,
    lost: tuple[int, int],
    chosen: tuple[Measure, ...],
    quantiles: tuple[float, ...],
    step: int,
    starts: range,
    formatter: Callable[[Any], dict[str, Any]] | None,
) -> list[dict[str, Any]]:
    """Each key's rows (``found``, in ``keys``' order) merged into the series' buckets over
    ``span``; windows in ``lost`` (expired from speed) leave their buckets unavailable.
    ``formatter``: one minute row's measures as an answer's, given for minute steps only
    (each bucket is then one window, taken as it is); None merges each bucket's rows."""
    lo, hi = span
    sources = []
    for start in starts:
        a, b = max(start, lo), min(start + step, hi)
        available = max(a, lost[0]) >= min(b, lost[1])  # no window of it may have expired
        sources.append((iso(start), bucket_source(a, b, boundary), available))
    nulls = dict.fromkeys(measure_names(chosen, quantiles))
    series = []
    for key, rows in zip(keys, found, strict=True):
        buckets = []
        if formatter is None:
            per_bucket: dict[int, list] = defaultdict(list)
            for row in rows:
                per_bucket[row[0] - row[0] % step].append(row[1:])
        else:  # one window per bucket: no merge needed
            per_minute = {row[0]: row for row in rows}
        for start, (text, source, available) in zip(starts, sources, strict=True):
            bucket = {
                "start": text,
                "final": source == "batch",
                "source": source,
                "available": available,
            }
            if not available:
                bucket.update(nulls)
            elif formatter is not None:
                row = per_minute.get(start)
                bucket.update(formatter(None if row is None else row[1:]))
            else:
                bucket.update(summarise(chosen, per_bucket.get(start, ()), quantiles))
            buckets.append(bucket)
        series.append({"key": key_dict(spec, key), "buckets": buckets})
    return series
