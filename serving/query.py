"""The query core: one answer per question, merged across the batch boundary.

:class:`Queries` plans which partitions answer a range (:mod:`serving.plan`),
reads them concurrently (:mod:`serving.store`), merges the rows by each
measure's kind (:mod:`serving.merge`) and says, in every answer, which
boundary it used per view and how old it is, how fresh the speed side is
(:mod:`serving.freshness`), which buckets are final (all from batch) or
provisional (some from speed), and which windows are unavailable (after the
boundary and older than the speed TTL: null, never zero).

Answers are plain dicts ready for JSON; times in them are ISO 8601 UTC. Asked with
``encoded=True``, the shared part of an answer (a timeseries' ``series``, a top-N's
``items``) is the JSON kept with it (an :class:`orjson.Fragment`), encoded once when it
was computed; with ``cached_only=True``, a question that would wait for its answer to be
computed is answered None (the hot path, :mod:`serving.hot`): kept answers are answered,
and so are stale ones (the question over the previous speed micro-batch), the new one's
computation started as for any request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from serving.cache import How, SharedCache
from serving.errors import QueryError
from serving.freshness import (
    FreshnessRules,
    boundary_age_s,
    health,
    reconciliation,
    speed_freshness,
    unavailable,
    unavailable_span,
)
from serving.gate import Answer
from serving.lru import Lru
from serving.merge import (
    DEFAULT_QUANTILES,
    hll_estimate,
    row_formatter,
)
from serving.plan import Grain, bucket_source, key_reads, window_reads, windows
from serving.ranking import Ranking
from serving.rules import (
    CacheRules,
    Limits,
    RangeQuery,
    check_keys,
    check_measures,
    check_quantiles,
    key_dict,
    view_spec,
)
from serving.series import series_buckets
from serving.store import Pointers, ServingStore, ViewPointers
from serving.timerange import MINUTE_MS, floor, iso, step_ms
from views import ViewSpec
from views.kinds import kind
from views.spec import Measure

__all__ = ["CacheRules", "Limits", "Queries", "RangeQuery", "check_quantiles"]

_FORMATTERS = 256
"""Row formatters kept per worker (one per view, measures and quantiles asked)."""


class Queries:
    """The questions serving answers, over one :class:`ServingStore`.

    Answers are shared (:class:`serving.cache.SharedCache`): identical questions
    are computed once, keyed by the question's windows *and* the generations of
    the pointers it read (:attr:`serving.store.ViewPointers.batch_generation`,
    :attr:`~serving.store.ViewPointers.speed_generation`), so no answer outlives
    a publish, a speed micro-batch or a replay's switch once the worker has
    re-read its pointers. What depends on the clock (freshness, ages, the
    ``unavailable`` note) is computed for every request; every answer's
    ``cache`` says whether it was computed for it and how old it is. While the answer
    over a new speed micro-batch is computed, other requests get the one over the
    previous micro-batch (at most ``stale_s`` old, marked ``stale``) instead of waiting;
    for a range relative to now, also the one over the windows of a moment ago.
    """

    def __init__(
        self,
        store: ServingStore,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        rules: FreshnessRules | None = None,
        cache: CacheRules | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or Limits()
        self.clock = clock
        self.rules = rules or FreshnessRules()
        self.cache_rules = cache or CacheRules()
        self.results = SharedCache(
            self.cache_rules.entries, self.cache_rules.max_age_s, stale_s=self.cache_rules.stale_s
        )
        self.ranking = Ranking(store, self.cache_rules.block_entries)
        self._formatters = Lru(_FORMATTERS)

    def _formatter(self, spec: ViewSpec, measures: tuple[Measure, ...], quantiles: Sequence[float]):
        cache_key = (spec.name, tuple(m.name for m in measures), tuple(quantiles))
        found = self._formatters.get(cache_key)
        if found is None:
            found = row_formatter(measures, quantiles)
            self._formatters.put(cache_key, found)
        return found

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # -- what every answer carries ------------------------------------------------------

    def _context(self, pointers: Pointers, views: Sequence[str], now: int) -> dict[str, Any]:
        return {
            "boundary": {name: iso(pointers.views[name].boundary) for name in views},
            "speed_version": {name: pointers.views[name].speed_version for name in views},
            "boundary_age_s": {
                name: boundary_age_s(pointers.views[name].boundary, now) for name in views
            },
            "freshness": {
                name: speed_freshness(pointers.views[name], now, self.rules) for name in views
            },
            "pointers_age_s": round(max(0, now - pointers.read_at) / 1000, 1),
        }

    async def _shared(
        self,
        question: tuple,
        view: ViewPointers,
        rq: RangeQuery,
        now: int,
        compute,
        cached_only: bool = False,
        placed: tuple = (),
    ) -> tuple[Any, RangeQuery, dict[str, Any]] | None:
        """``compute()``'s value for ``question`` over ``rq``, shared with identical requests,
        the range to state with it (``rq``, or for a moving range the one it was computed
        over: a kept answer's lies up to a window before ``rq``, a stale one's a few
        seconds) and the answer's ``cache`` note; None when ``cached_only`` and it would
        have to wait for the computation.

        The key holds the range's windows (and ``placed``: what else the range's place
        decides, e.g. the first bucket), the windows expired from speed (they move with
        the clock), the batch pointers' generation and, when the range reaches the
        boundary, the speed generation. While a key over speed windows is computed, its
        family's newest answer is answered (``stale``): the same question over older speed
        progress or, for a range asked relative to now, over the windows of a moment ago.
        Without the second, every viewer of ``now-15m`` waited at each minute's turn.
        """
        lo, hi = windows(rq.lo, rq.hi)
        lost = unavailable_span(view.boundary, now, self.rules)
        speed = view.boundary is None or hi > view.boundary
        key = (
            *question,
            *placed,
            lo,
            hi,
            None if lost is None else windows(*lost),
            view.batch_generation,
            view.speed_generation if speed else None,
        )
        max_age = self.cache_rules.max_age_s if speed else self.cache_rules.final_max_age_s
        if not speed:
            family = None
        elif rq.moving is not None:
            family = (*question, rq.moving, view.batch_generation)
        else:
            family = key[:-1]

        async def covering() -> tuple[Any, RangeQuery]:
            return await compute(), rq

        found = await self.results.get(key, covering, max_age, family, wait=not cached_only)
        if found is None:
            return None
        (value, covered), how, age = found
        return value, covered if rq.moving is not None else rq, _cache_note(how, age)

    def _key_reads(self, view: ViewPointers, rq: RangeQuery, coarsest: Grain):
        return key_reads(
            rq.lo, rq.hi, view.boundary, view.versions, view.speed_version, view.rolled_up, coarsest
        )

    async def _key_rows(
        self,
        spec: ViewSpec,
        key: tuple[str, ...],
        rq: RangeQuery,
        view: ViewPointers,
        measures: tuple[str, ...],
        coarsest: Grain = "minute",
    ) -> list[tuple]:
        """Rows ``(window_start_ms, *measures)`` of one key over ``rq``, each window of the
        range in exactly one row, at grains up to ``coarsest``."""
        store = self.store
        parts = await asyncio.gather(
            *(
                store.key_rows(
                    spec.name, r.layer, key, r.day, r.version, r.lo, r.hi, measures, r.grain
                )
                for r in self._key_reads(view, rq, coarsest)
            )
        )
        return [row for part in parts for row in part]

    # -- questions ------------------------------------------------------------------------

    async def timeseries(
        self,
        view: str,
        keys: Sequence[tuple[str, ...]],
        lo: int,
        hi: int,
        granularity: str = "minute",
        quantiles: Sequence[float] = DEFAULT_QUANTILES,
        measures: Sequence[str] = (),
        *,
        encoded: bool = False,
        cached_only: bool = False,
        moving: tuple[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """Per key, one bucket per ``granularity`` step of ``[lo, hi)``, zeros included.

        ``measures`` limits the answer (and the columns read) to those measures;
        empty means all of them. Hour and day buckets of batch windows are read
        from the rollups where a bucket is whole.
        """
        spec = view_spec(self.store, view)
        check_keys(spec, keys, self.limits)
        chosen = check_measures(spec, measures)
        names = tuple(m.name for m in chosen)
        quantiles = check_quantiles(quantiles, self.limits)
        rq = RangeQuery.checked(lo, hi, self.limits, moving)
        step = step_ms(granularity)
        first = floor(rq.lo, granularity)
        starts = list(range(first, rq.hi, step)) if rq.hi > rq.lo else []
        if len(starts) > self.limits.max_buckets:
            raise QueryError(
                "too_many_buckets",
                f"{len(starts)} {granularity} buckets asked; at most {self.limits.max_buckets}. "
                "Use a coarser granularity (hour, day) or a shorter range.",
            )
        pointers = await self.store.pointers()
        now = self.now_ms()
        p = pointers.views[view]
        keys = [tuple(k) for k in keys]

        async def compute() -> tuple[list[dict[str, Any]], orjson.Fragment]:
            series = await self._series(spec, keys, rq, p, now, chosen, names, quantiles, step)
            return series, orjson.Fragment(orjson.dumps(series))

        question = ("timeseries", view, tuple(keys), step, names, quantiles)
        shared = await self._shared(question, p, rq, now, compute, cached_only, (first,))
        if shared is None:
            return None
        (series, body), covered, note = shared
        rows = sum(len(one["buckets"]) for one in series)
        return Answer.of(
            rows=rows,
            answer={
                "view": view,
                "granularity": granularity,
                "start": iso(covered.lo),
                "end": iso(covered.hi),
                **self._context(pointers, [view], now),
                "unavailable": unavailable(p.boundary, now, self.rules, covered.lo, covered.hi),
                "cache": note,
                "series": body if encoded else series,
            },
        )

    async def _series(
        self,
        spec: ViewSpec,
        keys: list[tuple[str, ...]],
        rq: RangeQuery,
        p: ViewPointers,
        now: int,
        chosen: tuple[Measure, ...],
        names: tuple[str, ...],
        quantiles: tuple[float, ...],
        step: int,
    ) -> list[dict[str, Any]]:
        granularity: Grain = (
            "minute" if step == MINUTE_MS else "hour" if step < 86_400_000 else "day"
        )
        first = floor(rq.lo, granularity)
        starts = range(first, rq.hi, step) if rq.hi > rq.lo else range(0)
        found = await asyncio.gather(
            *(self._key_rows(spec, k, rq, p, names, granularity) for k in keys)
        )
        # The merges into buckets run in a thread: requests answered from the shared answers
        # meanwhile must not wait behind them on the event loop (serving/ranking.py).
        lost = unavailable_span(p.boundary, now, self.rules) or (0, 0)
        formatter = self._formatter(spec, chosen, quantiles) if step == MINUTE_MS else None
        return await asyncio.to_thread(
            series_buckets,
            spec,
            keys,
            found,
            (rq.lo, rq.hi),
            p.boundary,
            lost,
            chosen,
            quantiles,
            step,
            starts,
            formatter,
        )

    async def top(
        self,
        view: str,
        measure: str,
        lo: int,
        hi: int,
        n: int = 10,
        quantile: float = 0.95,
        min_samples: int = 1,
        *,
        encoded: bool = False,
        cached_only: bool = False,
        moving: tuple[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """The ``n`` keys with the largest merged ``measure`` over ``[lo, hi)``.

        Ranks on merged values: counts summed over the range, HLL sketches
        unioned, KLL sketches merged then their ``quantile`` taken (keys
        with fewer than ``min_samples`` values are left out). Reads whole
        days and hours of batch windows from the rollups (:mod:`serving.ranking`).
        """
        spec = view_spec(self.store, view)
        try:
            chosen = spec.measure(measure)
        except KeyError as error:
            raise QueryError("unknown_measure", str(error.args[0])) from None
        ranking = kind(chosen.kind)
        if not 1 <= n <= self.limits.max_n:
            raise QueryError("invalid_n", f"n must lie in 1..{self.limits.max_n}; got {n}.")
        if not 0.0 <= quantile <= 1.0:
            raise QueryError("invalid_quantile", f"quantile must lie in [0, 1]; got {quantile}.")
        rq = RangeQuery.checked(lo, hi, self.limits, moving)
        pointers = await self.store.pointers()
        now = self.now_ms()
        p = pointers.views[view]

        async def compute() -> tuple[list[dict[str, Any]], orjson.Fragment, bool]:
            reads = window_reads(rq.lo, rq.hi, p.boundary, p.versions, p.speed_version, p.rolled_up)
            if len(reads) > self.limits.max_top_partitions:
                raise QueryError(
                    "range_too_large",
                    f"This top-N would read {len(reads)} partitions (days published without "
                    f"rollups are read by the minute); at most {self.limits.max_top_partitions}. "
                    "Ask for a shorter range, or use SQL over gold.",
                )
            provisional = any(r.layer == "speed" for r in reads)
            lost = unavailable_span(p.boundary, now, self.rules)
            if lost is not None:  # rank on what is still there; the answer says what is not
                reads = [r for r in reads if r.layer == "batch" or not lost[0] <= r.start < lost[1]]
            ranked = await self.ranking.ranked(
                view, chosen, len(spec.keys), reads, p.watermark, quantile, min_samples, p.speed_run
            )
            items = []
            for value, key, samples in ranked[:n]:
                item = {"key": key_dict(spec, key), "value": value}
                if ranking.quantiles:
                    item["samples"] = samples
                elif ranking.integral:
                    item["value"] = round(value)
                items.append(item)
            return items, orjson.Fragment(orjson.dumps(items)), provisional

        question = ("top", view, measure, n, quantile, min_samples)
        shared = await self._shared(question, p, rq, now, compute, cached_only)
        if shared is None:
            return None
        (items, body, provisional), covered, note = shared
        return Answer.of(
            rows=len(items),
            answer={
                "view": view,
                "measure": measure,
                "rank": ranking.rank_label.format(q=f"{quantile * 100:g}"),
                "start": iso(covered.lo),
                "end": iso(covered.hi),
                "n": n,
                "final": not provisional,
                **self._context(pointers, [view], now),
                "unavailable": unavailable(p.boundary, now, self.rules, covered.lo, covered.hi),
                "cache": note,
                "items": body if encoded else items,
            },
        )

    async def reach(
        self,
        view: str,
        key: tuple[str, ...],
        lo: int,
        hi: int,
        *,
        cached_only: bool = False,
        moving: tuple[str, str] | None = None,
    ) -> dict[str, Any] | None:
        """Distinct visitors of one key over ``[lo, hi)``: the union of every window's sketch
        (whole days and hours of batch windows from the rollups). Its answer holds three
        numbers: nothing to keep encoded."""
        spec = view_spec(self.store, view)
        hll = [i for i, m in enumerate(spec.measures) if kind(m.kind).distinct]
        if not hll:
            raise QueryError(
                "no_distinct_count", f"View {view!r} has no distinct-count (hll) measure."
            )
        check_keys(spec, [key], self.limits)
        key = tuple(key)
        rq = RangeQuery.checked(lo, hi, self.limits, moving)
        pointers = await self.store.pointers()
        now = self.now_ms()
        measure = spec.measures[hll[0]]
        p = pointers.views[view]
        source = bucket_source(rq.lo, rq.hi, p.boundary) if rq.hi > rq.lo else "batch"
        lost = unavailable(p.boundary, now, self.rules, rq.lo, rq.hi)
        answer = {
            "view": view,
            "key": key_dict(spec, key),
            "measure": measure.name,
            "start": iso(rq.lo),
            "end": iso(rq.hi),
            "visitors": None,
            "lower_bound": None,
            "upper_bound": None,
            "available": lost is None,
            "final": source == "batch",
            "source": source,
            **self._context(pointers, [view], now),
            "unavailable": lost,
            "cache": None,
        }
        if lost is None:  # a union missing some windows would be a silent undercount

            async def compute() -> tuple[int, int, int]:
                rows = await self._key_rows(spec, key, rq, p, (measure.name,), "day")
                estimate = await asyncio.to_thread(hll_estimate, [row[1] for row in rows])
                return round(estimate.estimate), round(estimate.lower), round(estimate.upper)

            question = ("reach", view, key)
            shared = await self._shared(question, p, rq, now, compute, cached_only)
            if shared is None:
                return None
            found, covered, answer["cache"] = shared
            answer["start"], answer["end"] = iso(covered.lo), iso(covered.hi)
            answer["visitors"], answer["lower_bound"], answer["upper_bound"] = found
        return Answer.of(answer, rows=1)

    async def health(self) -> dict[str, Any]:
        """Boundary, speed freshness and the last reconciliation of every view, and each
        pipeline's status (re-reads the pointers if stale): :func:`serving.freshness.health`.
        """
        pointers = await self.store.pointers()
        views = list(self.store.views)
        context = self._context(pointers, views, self.now_ms())
        reconciled = {name: pointers.views[name].reconciled for name in views}
        answer = health(context["freshness"], context["boundary_age_s"], reconciled, self.rules)
        shown = {name: reconciliation(row) for name, row in reconciled.items()}
        return answer | context | {"reconciled": shown}


def _cache_note(how: How, age_s: float) -> dict[str, Any]:
    """What an answer says about its sharing: ``hit`` (not computed for this request),
    ``shared`` (computed for an identical request at the same time), ``stale`` (computed
    from the speed progress before the newest, which is being computed) and its age."""
    return {
        "hit": how != "computed",
        "shared": how == "shared",
        "stale": how == "stale",
        "age_s": round(age_s, 3),
    }
