"""The query core: one answer per question, merged across the batch boundary.

:class:`Queries` plans which partitions answer a range (:mod:`serving.plan`),
reads them concurrently (:mod:`serving.store`), merges the rows by each
measure's kind (:mod:`serving.merge`) and says, in every answer, which
boundary it used per view and how old it is, how fresh the speed side is
(:mod:`serving.freshness`), which buckets are final (all from batch) or
provisional (some from speed), and which windows are unavailable (after the
boundary and older than the speed TTL: null, never zero).

Answers are plain dicts ready for JSON; times in them are ISO 8601 UTC.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from serving.errors import QueryError
from serving.freshness import (
    FreshnessRules,
    boundary_age_s,
    drift_message,
    health_status,
    reconciliation,
    speed_freshness,
    unavailable,
    unavailable_span,
)
from serving.lru import Lru
from serving.merge import (
    DEFAULT_QUANTILES,
    hll_estimate,
    measure_names,
    rank_value,
    row_formatter,
    summarise,
)
from serving.plan import bucket_source, key_reads, minute_reads
from serving.store import Pointers, ServingStore
from serving.timerange import MINUTE_MS, floor, iso, step_ms
from views import ViewSpec
from views.kinds import kind
from views.spec import Measure

__all__ = ["Limits", "Queries", "RangeQuery", "check_quantiles"]

_MAX_IN_FLIGHT = 256
_FORMATTERS = 256
"""Row formatters kept per worker (one per view, measures and quantiles asked)."""


@dataclass(frozen=True)
class Limits:
    """What one question may ask for (from :class:`core.settings.ServingSettings`)."""

    max_range_days: int = 31
    max_buckets: int = 2880
    max_top_minutes: int = 2 * 1440
    max_keys: int = 20
    max_n: int = 100
    max_quantiles: int = 10


@dataclass(frozen=True)
class RangeQuery:
    """A validated range: windows whose start lies in ``[lo, hi)`` (epoch ms)."""

    lo: int
    hi: int

    @classmethod
    def checked(cls, lo: int, hi: int, limits: Limits) -> RangeQuery:
        if hi < lo:
            raise QueryError(
                "invalid_range", f"end ({iso(hi)}) lies before start ({iso(lo)}); swap them."
            )
        days = (hi - lo) / (24 * 3600 * 1000)
        if days > limits.max_range_days:
            raise QueryError(
                "range_too_large",
                f"The range spans {days:.1f} days; at most {limits.max_range_days} are allowed. "
                "Ask for a shorter range, or use SQL over the gold tables for longer ones.",
            )
        return cls(lo, hi)


def _spec(store: ServingStore, view: str) -> ViewSpec:
    try:
        return store.spec(view)
    except KeyError:
        known = ", ".join(store.views)
        raise QueryError("unknown_view", f"No view {view!r}; the views are: {known}.") from None


def _key_dict(spec: ViewSpec, key: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(spec.keys, key, strict=True))


def check_keys(spec: ViewSpec, keys: Sequence[tuple[str, ...]], limits: Limits) -> None:
    """Every key names one value per key column of the view; not too many keys."""
    if not keys:
        raise QueryError(
            "missing_key", f"Name at least one {'/'.join(spec.keys)} of view {spec.name!r}."
        )
    if len(keys) > limits.max_keys:
        raise QueryError(
            "too_many_keys", f"{len(keys)} keys asked; at most {limits.max_keys} per question."
        )
    for key in keys:
        if len(key) != len(spec.keys):
            raise QueryError(
                "invalid_key",
                f"View {spec.name!r} is keyed by {list(spec.keys)}; got {list(key)!r}.",
            )
        for value in key:
            if not isinstance(value, str) or not value or len(value) > 2048:
                raise QueryError(
                    "invalid_key",
                    f"A key is a non-empty string of at most 2048 characters; got {value!r}.",
                )


def check_quantiles(quantiles: Sequence[float], limits: Limits) -> tuple[float, ...]:
    """The quantiles of kll measures one answer shows: each in [0, 1], not too many.

    >>> check_quantiles([0.9, 0.99], Limits())
    (0.9, 0.99)
    """
    if not quantiles:
        raise QueryError("invalid_quantile", "Ask for at least one quantile, e.g. quantile=0.95.")
    if len(quantiles) > limits.max_quantiles:
        raise QueryError(
            "too_many_quantiles",
            f"{len(quantiles)} quantiles asked; at most {limits.max_quantiles} per question.",
        )
    for q in quantiles:
        if not 0.0 <= q <= 1.0:  # also refuses NaN
            raise QueryError(
                "invalid_quantile",
                f"Each quantile must lie in [0, 1] (0.95 is the 95th percentile); got {q}.",
            )
    return tuple(float(q) for q in quantiles)


def _measures(spec: ViewSpec, names: Sequence[str]) -> tuple[Measure, ...]:
    """The view's measures called ``names`` in the view's order (all for none)."""
    if not names:
        return spec.measures
    known = {m.name for m in spec.measures}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise QueryError(
            "unknown_measure",
            f"View {spec.name!r} has no measure {unknown[0]!r}; it has: "
            + ", ".join(m.name for m in spec.measures)
            + ".",
        )
    return tuple(m for m in spec.measures if m.name in set(names))


class Queries:
    """The questions serving answers, over one :class:`ServingStore`."""

    def __init__(
        self,
        store: ServingStore,
        limits: Limits | None = None,
        clock: Callable[[], float] = time.time,
        rules: FreshnessRules | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or Limits()
        self.clock = clock
        self.rules = rules or FreshnessRules()
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

    async def _gather(self, calls: list) -> list:
        out: list = []
        for i in range(0, len(calls), _MAX_IN_FLIGHT):
            out += await asyncio.gather(*(c() for c in calls[i : i + _MAX_IN_FLIGHT]))
        return out

    async def _key_rows(
        self,
        spec: ViewSpec,
        key: tuple[str, ...],
        rq: RangeQuery,
        pointers: Pointers,
        measures: tuple[str, ...],
    ) -> list[tuple]:
        view = pointers.views[spec.name]
        reads = key_reads(rq.lo, rq.hi, view.boundary, view.versions, view.speed_version)
        store = self.store
        parts = await asyncio.gather(
            *(
                store.key_rows(spec.name, r.layer, key, r.day, r.version, r.lo, r.hi, measures)
                for r in reads
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
    ) -> dict[str, Any]:
        """Per key, one bucket per ``granularity`` step of ``[lo, hi)``, zeros included.

        ``measures`` limits the answer (and the columns read) to those measures;
        empty means all of them.
        """
        spec = _spec(self.store, view)
        check_keys(spec, keys, self.limits)
        chosen = _measures(spec, measures)
        names = tuple(m.name for m in chosen)
        quantiles = check_quantiles(quantiles, self.limits)
        rq = RangeQuery.checked(lo, hi, self.limits)
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
        boundary = pointers.views[view].boundary
        found = await asyncio.gather(*(self._key_rows(spec, k, rq, pointers, names) for k in keys))
        lost = unavailable_span(boundary, now, self.rules) or (0, 0)
        sources = []
        for start in starts:
            a, b = max(start, rq.lo), min(start + step, rq.hi)
            available = max(a, lost[0]) >= min(b, lost[1])  # no window of it may have expired
            sources.append((iso(start), bucket_source(a, b, boundary), available))
        nulls = dict.fromkeys(measure_names(chosen, quantiles))
        formatter = self._formatter(spec, chosen, quantiles) if step == MINUTE_MS else None
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
            series.append({"key": _key_dict(spec, key), "buckets": buckets})
        return {
            "view": view,
            "granularity": granularity,
            "start": iso(rq.lo),
            "end": iso(rq.hi),
            **self._context(pointers, [view], now),
            "unavailable": unavailable(boundary, now, self.rules, rq.lo, rq.hi),
            "series": series,
        }

    async def top(
        self,
        view: str,
        measure: str,
        lo: int,
        hi: int,
        n: int = 10,
        quantile: float = 0.95,
        min_samples: int = 1,
    ) -> dict[str, Any]:
        """The ``n`` keys with the largest merged ``measure`` over ``[lo, hi)``.

        Ranks on merged values: counts summed over the range, HLL sketches
        unioned, KLL sketches merged then their ``quantile`` taken (keys
        with fewer than ``min_samples`` values are left out).
        """
        spec = _spec(self.store, view)
        try:
            chosen = spec.measure(measure)
        except KeyError as error:
            raise QueryError("unknown_measure", str(error.args[0])) from None
        ranking = kind(chosen.kind)
        if not 1 <= n <= self.limits.max_n:
            raise QueryError("invalid_n", f"n must lie in 1..{self.limits.max_n}; got {n}.")
        if not 0.0 <= quantile <= 1.0:
            raise QueryError("invalid_quantile", f"quantile must lie in [0, 1]; got {quantile}.")
        rq = RangeQuery.checked(lo, hi, self.limits)
        minutes = (rq.hi - rq.lo) / MINUTE_MS
        if minutes > self.limits.max_top_minutes:
            raise QueryError(
                "range_too_large",
                f"Top-N reads every window of its range: {minutes:.0f} minutes asked, at most "
                f"{self.limits.max_top_minutes}. Ask for a shorter range, or use SQL over gold.",
            )
        pointers = await self.store.pointers()
        now = self.now_ms()
        p = pointers.views[view]
        reads = minute_reads(rq.lo, rq.hi, p.boundary, p.versions, p.speed_version)
        provisional = any(r.layer == "speed" for r in reads) or (
            p.boundary is None and rq.hi > rq.lo
        )
        lost = unavailable_span(p.boundary, now, self.rules)
        if lost is not None:  # rank on what is still there; the answer says what is not
            reads = [r for r in reads if r.layer == "batch" or not lost[0] <= r.minute < lost[1]]
        store = self.store
        parts = await self._gather(
            [
                lambda r=r: store.minute_rows(view, r.layer, measure, r.minute, r.version)
                for r in reads
            ]
        )
        width = len(spec.keys)
        values: dict[tuple, list] = defaultdict(list)
        for part in parts:
            for row in part:
                values[row[:width]].append(row[width])
        ranked = []
        for key, vals in values.items():
            value, samples = rank_value(chosen, vals, quantile)
            if value is not None and (not ranking.quantiles or samples >= min_samples):
                ranked.append((value, key, samples))
        ranked.sort(key=lambda item: (-item[0], item[1]))
        items = []
        for value, key, samples in ranked[:n]:
            item = {"key": _key_dict(spec, key), "value": value}
            if ranking.quantiles:
                item["samples"] = samples
            elif ranking.integral:
                item["value"] = round(value)
            items.append(item)
        return {
            "view": view,
            "measure": measure,
            "rank": ranking.rank_label.format(q=f"{quantile * 100:g}"),
            "start": iso(rq.lo),
            "end": iso(rq.hi),
            "n": n,
            "final": not provisional,
            **self._context(pointers, [view], now),
            "unavailable": unavailable(p.boundary, now, self.rules, rq.lo, rq.hi),
            "items": items,
        }

    async def reach(self, view: str, key: tuple[str, ...], lo: int, hi: int) -> dict[str, Any]:
        """Distinct visitors of one key over ``[lo, hi)``: the union of every window's sketch."""
        spec = _spec(self.store, view)
        hll = [i for i, m in enumerate(spec.measures) if m.kind == "hll"]
        if not hll:
            raise QueryError(
                "no_distinct_count", f"View {view!r} has no distinct-count (hll) measure."
            )
        check_keys(spec, [key], self.limits)
        rq = RangeQuery.checked(lo, hi, self.limits)
        pointers = await self.store.pointers()
        now = self.now_ms()
        measure = spec.measures[hll[0]]
        boundary = pointers.views[view].boundary
        source = bucket_source(rq.lo, rq.hi, boundary) if rq.hi > rq.lo else "batch"
        lost = unavailable(boundary, now, self.rules, rq.lo, rq.hi)
        answer = {
            "view": view,
            "key": _key_dict(spec, key),
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
        }
        if lost is None:  # a union missing some windows would be a silent undercount
            rows = await self._key_rows(spec, key, rq, pointers, (measure.name,))
            estimate = hll_estimate(row[1] for row in rows)
            answer["visitors"] = round(estimate.estimate)
            answer["lower_bound"] = round(estimate.lower)
            answer["upper_bound"] = round(estimate.upper)
        return answer

    async def health(self) -> dict[str, Any]:
        """Boundary, speed freshness and the last reconciliation of every view (re-reads the
        pointers if stale).

        ``status`` is ``error`` when a view's event time is ahead of now, ``degraded``
        when a view's batch boundary is older than the rules allow or its last
        reconciliation found the layers apart (``message`` names the views and why),
        else ``ok``.
        """
        pointers = await self.store.pointers()
        views = list(self.store.views)
        context = self._context(pointers, views, self.now_ms())
        status, message = health_status(context["freshness"], context["boundary_age_s"], self.rules)
        code = {"error": "speed_event_time", "degraded": "batch_boundary_old"}.get(status)
        drift = drift_message({name: pointers.views[name].reconciled for name in views})
        if drift is not None and status != "error":
            status, message = "degraded", "; ".join(filter(None, (message, drift)))
            code = code or "layers_disagree"
        answer: dict[str, Any] = {"status": status, "cassandra": "reachable"}
        if message is not None:
            answer |= {"error": code, "message": message}
        reconciled = {name: reconciliation(pointers.views[name].reconciled) for name in views}
        return answer | context | {"reconciled": reconciled}
