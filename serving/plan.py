"""Which rows answer a range: batch before the boundary, speed at or after it, coarsest first.

Pure functions over epoch milliseconds. A range ``[lo, hi)`` holds the
1-minute windows whose start lies in it. The rule, per window ``w``:

- ``w.start < boundary``: the batch view, at the version ``batch_days``
  names for ``w``'s day; a day with no version has no events (nothing to read);
- ``w.start >= boundary``: the speed view, in the version of its tables
  ``speed_versions`` names (a read's ``version``);
- no boundary (the batch layer never published the view): the speed view.

Speed rows older than the boundary exist (they expire by TTL) and are never
read, so no window is counted twice.

Batch windows are read at the **coarsest grain covering them**: a whole UTC
day from its day rollup row, whole hours from hour rows, the ragged edges
from minutes (:func:`grain_pieces`). Rollups are the merges of the minute rows
they cover, published under the same day version, so the answer is the same
at any grain. A day whose version has no rollups (published by an older
release, ``batch_days.rollups`` false) is read from its minutes. Speed windows
are minutes: after the boundary there are only a few hours of them, and
serving caches the merges of the closed ones (:mod:`serving.ranking`).

>>> reads = key_reads(0, 3 * 60_000, boundary=60_000, versions={})
>>> [(r.layer, r.lo, r.hi) for r in reads]
[('speed', 60000, 180000)]
>>> from datetime import date
>>> reads = key_reads(0, 3 * 60_000, boundary=60_000, versions={date(1970, 1, 1): 7})
>>> [(r.layer, r.version, r.lo, r.hi) for r in reads]
[('batch', 7, 0, 60000), ('speed', 0, 60000, 180000)]
>>> [(g, lo // 60_000, hi // 60_000) for g, lo, hi in grain_pieces(30 * 60_000, 2 * DAY_MS)]
[('minute', 30, 60), ('hour', 60, 1440), ('day', 1440, 2880)]
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Literal

from serving.timerange import DAY_MS, HOUR_MS, MINUTE_MS, days_between

__all__ = [
    "GRAIN_MS",
    "Grain",
    "KeyRead",
    "Layer",
    "WindowRead",
    "bucket_source",
    "grain_pieces",
    "key_reads",
    "window_reads",
    "windows",
]

Layer = Literal["batch", "speed"]
Grain = Literal["minute", "hour", "day"]
GRAIN_MS: dict[str, int] = {"minute": MINUTE_MS, "hour": HOUR_MS, "day": DAY_MS}
_COARSER = ("day", "hour", "minute")


@dataclass(frozen=True)
class KeyRead:
    """One partition slice of a by-key table: windows ``[lo, hi)`` of one UTC day."""

    layer: Layer
    day: date
    version: int
    """The batch version of the day, or the speed tables' version."""
    lo: int
    hi: int
    grain: Grain = "minute"


@dataclass(frozen=True)
class WindowRead:
    """One partition of a by-window table: every key's row of one window of ``grain``."""

    layer: Layer
    start: int
    version: int
    """The batch version of the window's day, or the speed tables' version."""
    grain: Grain = "minute"

    @property
    def end(self) -> int:
        return self.start + GRAIN_MS[self.grain]


def windows(lo: int, hi: int) -> tuple[int, int]:
    """The range of window starts ``[lo, hi)`` holds, on the minute grid.

    >>> windows(1, 60_000), windows(60_000, 60_001)
    ((60000, 60000), (60000, 120000))
    """
    return -(-lo // MINUTE_MS) * MINUTE_MS, -(-hi // MINUTE_MS) * MINUTE_MS


def grain_pieces(lo: int, hi: int, coarsest: Grain = "day") -> list[tuple[Grain, int, int]]:
    """``[lo, hi)`` (minute-aligned) cut into runs of whole windows, coarsest first.

    Whole UTC days become one ``day`` piece, whole hours around them one
    ``hour`` piece per side, the rest ``minute`` pieces; none coarser than
    ``coarsest``.
    """
    grains = _COARSER[_COARSER.index(coarsest) :]

    def cut(a: int, b: int, level: int) -> list[tuple[Grain, int, int]]:
        if a >= b:
            return []
        grain = grains[level]
        if level == len(grains) - 1:
            return [(grain, a, b)]
        step = GRAIN_MS[grain]
        first, last = -(-a // step) * step, b - b % step
        if first >= last:
            return cut(a, b, level + 1)
        return [*cut(a, first, level + 1), (grain, first, last), *cut(last, b, level + 1)]

    return cut(lo, hi, 0)


def _layers(
    lo: int,
    hi: int,
    boundary: int | None,
    versions: Mapping[date, int],
    rolled_up: Collection[date],
    coarsest: Grain,
) -> tuple[list[tuple[Grain, date, int, int, int]], tuple[int, int]]:
    """The batch part of ``[lo, hi)`` as ``(grain, day, version, lo, hi)`` runs per UTC
    day, and the speed part ``(lo, hi)``; both on the minute grid, split at the boundary."""
    lo, hi = windows(lo, hi)
    if boundary is not None:
        boundary = windows(boundary, boundary)[0]
    cut = lo if boundary is None else min(max(boundary, lo), hi)
    out = []
    for day, day_lo, day_hi in days_between(lo, cut):
        version = versions.get(day)
        if version is None:
            continue  # nothing published that day: zeros
        pieces = grain_pieces(day_lo, day_hi, coarsest if day in rolled_up else "minute")
        out += [(grain, day, version, a, b) for grain, a, b in pieces]
    return out, (cut, hi)


def key_reads(
    lo: int,
    hi: int,
    boundary: int | None,
    versions: Mapping[date, int],
    speed_version: int = 0,
    rolled_up: Collection[date] = (),
    coarsest: Grain = "minute",
) -> list[KeyRead]:
    """The partition slices answering windows ``[lo, hi)`` of one key.

    Batch days in ``rolled_up`` are read at grains up to ``coarsest`` (a
    timeseries never coarser than its buckets), the others from minutes.
    """
    batch, (speed_lo, speed_hi) = _layers(lo, hi, boundary, versions, rolled_up, coarsest)
    reads = [KeyRead("batch", day, version, a, b, grain) for grain, day, version, a, b in batch]
    speed = days_between(speed_lo, speed_hi)
    reads += [KeyRead("speed", d, speed_version, a, b) for d, a, b in speed]
    return reads


def window_reads(
    lo: int,
    hi: int,
    boundary: int | None,
    versions: Mapping[date, int],
    speed_version: int = 0,
    rolled_up: Collection[date] = (),
    coarsest: Grain = "day",
) -> list[WindowRead]:
    """The by-window partitions answering windows ``[lo, hi)`` (every key), oldest first."""
    batch, (speed_lo, speed_hi) = _layers(lo, hi, boundary, versions, rolled_up, coarsest)
    reads = []
    for grain, _day, version, a, b in batch:
        step = GRAIN_MS[grain]
        reads += [WindowRead("batch", start, version, grain) for start in range(a, b, step)]
    reads += [WindowRead("speed", m, speed_version) for m in range(speed_lo, speed_hi, MINUTE_MS)]
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
