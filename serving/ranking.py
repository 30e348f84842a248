"""Top-N over any range: the coarsest partitions, merged in blocks, each immutable block once.

A top-N reads one by-window partition (every key's row) per window of the
plan (:func:`serving.plan.window_reads`): whole days from the day rollups,
whole hours from the hour rollups, minutes at the ragged edges and after
the batch boundary. The reads are grouped into **blocks**
(:func:`blocks`): a run of batch windows of one grain, or the closed speed
minutes of one hour (the speed watermark has passed their end, so the
speed layer will not change them). Such a block never changes, so its
per-key merge (:meth:`views.kinds.Kind.merge_stored`, the views' own merge
rules) is computed once per worker and kept: a month's top-N is then the
merge of a handful of block partials per key, and only the open minutes at
the speed edge are read and merged for every answer.

>>> from serving.plan import WindowRead as W
>>> reads = [W("batch", 0, 1, "hour"), W("batch", 3_600_000, 1, "hour"),
...          W("speed", 7_200_000, 0), W("speed", 7_260_000, 0)]
>>> [(cacheable, len(run)) for cacheable, run in blocks(reads, watermark=7_260_000)]
[(True, 2), (True, 1), (False, 1)]
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from serving.cache import SharedCache
from serving.merge import rank_value
from serving.plan import WindowRead
from serving.store import ServingStore
from serving.timerange import HOUR_MS
from views.kinds import kind
from views.spec import Measure

__all__ = ["Ranking", "blocks"]

_MAX_IN_FLIGHT = 256


def blocks(
    reads: Sequence[WindowRead], watermark: int | None
) -> list[tuple[bool, tuple[WindowRead, ...]]]:
    """``(cacheable, reads)`` per block, in the reads' order.

    Batch reads form one block per run of one grain; speed reads whose window
    ended at or before ``watermark`` one block per hour; the other speed reads
    (still open) one block that is never kept.
    """
    out: list[tuple[bool, tuple[WindowRead, ...]]] = []
    run: list[WindowRead] = []
    run_key: tuple | None = None
    open_reads: list[WindowRead] = []
    for read in reads:
        if read.layer == "speed" and (watermark is None or read.end > watermark):
            open_reads.append(read)
            continue
        key = (
            (read.layer, read.grain) if read.layer == "batch" else ("speed", read.start // HOUR_MS)
        )
        if key != run_key and run:
            out.append((True, tuple(run)))
            run = []
        run_key = key
        run.append(read)
    if run:
        out.append((True, tuple(run)))
    if open_reads:
        out.append((False, tuple(open_reads)))
    return out


class Ranking:
    """Top-N answers over one :class:`ServingStore`, with the merged blocks kept per worker."""

    def __init__(self, store: ServingStore, block_entries: int = 2048) -> None:
        self.store = store
        # Blocks are immutable: kept until evicted, however old.
        self.blocks = SharedCache(block_entries, max_age_s=float("inf"))

    async def _rows(self, view: str, measure: str, reads: Sequence[WindowRead]) -> list:
        store = self.store
        out: list = []
        for i in range(0, len(reads), _MAX_IN_FLIGHT):
            out += await asyncio.gather(
                *(
                    store.window_rows(view, r.layer, measure, r.start, r.version, r.grain)
                    for r in reads[i : i + _MAX_IN_FLIGHT]
                )
            )
        return out

    async def _partials(
        self, view: str, measure: Measure, width: int, reads: Sequence[WindowRead]
    ) -> dict[tuple, Any]:
        """Per key, the merge of ``measure`` over ``reads`` (stored form)."""
        parts = await self._rows(view, measure.name, reads)
        return await asyncio.to_thread(_merged, parts, width, measure)

    async def ranked(
        self,
        view: str,
        measure: Measure,
        width: int,
        reads: Sequence[WindowRead],
        watermark: int | None,
        quantile: float,
        min_samples: int,
        speed_run: int | None = None,
    ) -> list[tuple[float, tuple, int]]:
        """``(value, key, samples)`` of every key with rows in ``reads``, best first.

        ``width``: the number of key columns of the view; ``watermark`` and ``speed_run``:
        the speed layer's progress (a closed speed block is kept for the run that closed it).
        """
        chosen = blocks(reads, watermark)

        async def one(cacheable: bool, run: tuple[WindowRead, ...]) -> dict[tuple, Any]:
            if not cacheable:
                return await self._partials(view, measure, width, run)
            key = (view, measure.name, speed_run, run)
            value, _how, _age = await self.blocks.get(
                key, lambda: self._partials(view, measure, width, run)
            )
            return value

        partials = await asyncio.gather(*(one(c, run) for c, run in chosen))
        return await asyncio.to_thread(_ranked, partials, measure, quantile, min_samples)


def _merged(parts: Sequence[Sequence[tuple]], width: int, measure: Measure) -> dict[tuple, Any]:
    """Per key (the rows' first ``width`` values), the merge of the measure's stored values.

    Run in a thread, as :func:`_ranked` is: merging a block of a day's minutes costs
    milliseconds, and requests answered meanwhile from the shared answers must not wait
    behind it on the event loop (the interpreter switches threads every few ms).
    """
    values: dict[tuple, list] = defaultdict(list)
    for part in parts:
        for row in part:
            values[row[:width]].append(row[width])
    merge = kind(measure.kind).merge_stored
    return {key: merge(vals) for key, vals in values.items()}


def _ranked(
    partials: Sequence[dict[tuple, Any]], measure: Measure, quantile: float, min_samples: int
) -> list[tuple[float, tuple, int]]:
    """``(value, key, samples)`` of every key of the block partials, best first."""
    ranking = kind(measure.kind)
    values: dict[tuple, list] = defaultdict(list)
    for part in partials:
        for key, value in part.items():
            values[key].append(value)
    out = []
    for key, vals in values.items():
        value, samples = rank_value(measure, vals, quantile)
        if value is not None and (not ranking.quantiles or samples >= min_samples):
            out.append((value, key, samples))
    out.sort(key=lambda item: (-item[0], item[1]))
    return out
