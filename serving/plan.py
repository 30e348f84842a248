"""Which rows answer a range: batch before the boundary, speed at or after it.

Pure functions over epoch milliseconds. The rule, per 1-minute window ``w``:

- ``w.start < boundary``: the batch view, at the version ``batch_days``
  names for ``w``'s day; a day with no version has no events (nothing to read);
- ``w.start >= boundary``: the speed view, in the version of its tables
  ``speed_versions`` names (a read's ``version``);
- no boundary (the batch layer never published the view): the speed view.

Speed rows older than the boundary exist (they expire by TTL) and are never
read, so no window is counted twice.

>>> reads = key_reads(0, 3 * 60_000, boundary=60_000, versions={})
>>> [(r.layer, r.lo, r.hi) for r in reads]
[('speed', 60000, 180000)]
>>> from datetime import date
>>> reads = key_reads(0, 3 * 60_000, boundary=60_000, versions={date(1970, 1, 1): 7})
>>> [(r.layer, r.version, r.lo, r.hi) for r in reads]
[('batch', 7, 0, 60000), ('speed', 0, 60000, 180000)]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Literal

from serving.timerange import MINUTE_MS, day_of, days_between

__all__ = ["KeyRead", "Layer", "MinuteRead", "bucket_source", "key_reads", "minute_reads"]

Layer = Literal["batch", "speed"]


@dataclass(frozen=True)
class KeyRead:
    """One partition slice of a by-key table: windows ``[lo, hi)`` of one UTC day."""

    layer: Layer
    day: date
    version: int
    """The batch version of the day, or the speed tables' version."""
    lo: int
    hi: int


@dataclass(frozen=True)
class MinuteRead:
    """One partition of a by-minute table: every key's row of one window."""

    layer: Layer
    minute: int
    version: int
    """The batch version of the minute's day, or the speed tables' version."""


def _split(lo: int, hi: int, boundary: int | None) -> tuple[tuple[int, int], tuple[int, int]]:
    cut = lo if boundary is None else min(max(boundary, lo), hi)
    return (lo, cut), (cut, hi)


def key_reads(
    lo: int, hi: int, boundary: int | None, versions: Mapping[date, int], speed_version: int = 0
) -> list[KeyRead]:
    """The partition slices answering windows ``[lo, hi)`` of one key."""
    (batch_lo, batch_hi), (speed_lo, speed_hi) = _split(lo, hi, boundary)
    reads = []
    for day, day_lo, day_hi in days_between(batch_lo, batch_hi):
        version = versions.get(day)
        if version is not None:
            reads.append(KeyRead("batch", day, version, day_lo, day_hi))
    speed = days_between(speed_lo, speed_hi)
    reads += [KeyRead("speed", d, speed_version, a, b) for d, a, b in speed]
    return reads


def minute_reads(
    lo: int, hi: int, boundary: int | None, versions: Mapping[date, int], speed_version: int = 0
) -> list[MinuteRead]:
    """The by-minute partitions answering windows ``[lo, hi)`` (every key)."""
    first = -(-lo // MINUTE_MS) * MINUTE_MS
    reads = []
    for minute in range(first, hi, MINUTE_MS):
        if boundary is not None and minute < boundary:
            version = versions.get(day_of(minute))
            if version is not None:
                reads.append(MinuteRead("batch", minute, version))
        else:
            reads.append(MinuteRead("speed", minute, speed_version))
    return reads


def bucket_source(start: int, end: int, boundary: int | None) -> Literal["batch", "speed", "mixed"]:
    """Where the windows ``[start, end)`` of a bucket come from.

    >>> bucket_source(0, 60_000, 60_000), bucket_source(0, 120_000, 60_000)
    ('batch', 'mixed')
    >>> bucket_source(0, 60_000, None)
    'speed'
    """
    if boundary is None or start >= boundary:
        return "speed"
    return "batch" if end <= boundary else "mixed"
