"""Answers computed once and shared: a bounded cache with request coalescing.

Dashboards are many viewers polling the same few questions every few
seconds. :class:`SharedCache` computes each distinct key once: a request
that arrives while the same key is being computed awaits that computation
(coalescing) instead of starting its own, and later ones reuse the result
until it is ``max_age_s`` old or evicted (least recently used first).

Correctness rests on the key, not on the age: serving keys an answer by the
question *and* the pointers it was computed from (boundary and day versions,
the speed version and the speed layer's progress, :meth:`serving.store.ViewPointers.token`),
so a publish or a speed micro-batch makes the next request a new key once
the worker has re-read its pointers (``pointer_cache_s``). ``max_age_s``
only bounds how long an entry may sit.

>>> import asyncio
>>> cache = SharedCache(entries=8, max_age_s=60)
>>> calls = []
>>> async def compute():
...     calls.append(1)
...     await asyncio.sleep(0)
...     return "answer"
>>> async def three():
...     return await asyncio.gather(*(cache.get("q", compute) for _ in range(3)))
>>> [(value, how) for value, how, _age in asyncio.run(three())], len(calls)
([('answer', 'computed'), ('answer', 'shared'), ('answer', 'shared')], 1)
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Literal

__all__ = ["CacheStats", "How", "SharedCache"]

How = Literal["computed", "shared", "cached", "stale"]
"""How a value was got: computed for this request, shared with a request computing it at
the same time, cached from an earlier one, or ``stale``: the newest value of the key's
*family* (the same question over older speed progress) while the key is being computed."""


class CacheStats:
    """Counters of one cache (``/metrics``)."""

    __slots__ = ("cached", "computed", "evicted", "shared", "stale")

    def __init__(self) -> None:
        self.computed = self.shared = self.cached = self.stale = self.evicted = 0


class SharedCache:
    """Values by key, computed once per key (concurrent callers share the computation)."""

    def __init__(
        self,
        entries: int,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
        stale_s: float = 0.0,
    ) -> None:
        if entries < 0 or max_age_s < 0 or stale_s < 0:
            raise ValueError(
                f"entries, max_age_s and stale_s must be >= 0; got {entries}, {max_age_s}, "
                f"{stale_s}."
            )
        self.entries = entries
        self.max_age_s = max_age_s
        self.stale_s = stale_s
        """How old the newest value of a family may be to be answered while its successor is
        computed (0: never; callers wait for the computation)."""
        self.clock = clock
        self.stats = CacheStats()
        self._done: OrderedDict[Hashable, tuple[Any, float]] = OrderedDict()
        self._running: dict[Hashable, asyncio.Future] = {}
        self._newest: OrderedDict[Hashable, tuple[Any, float]] = OrderedDict()
        """Per family, the newest value computed and when."""

    def __len__(self) -> int:
        return len(self._done)

    def peek(self, key: Hashable, max_age_s: float | None = None) -> tuple[Any, How, float] | None:
        """``(value, "cached", age_s)`` of ``key`` when a value at most ``max_age_s`` old is
        kept (counted as :meth:`get` counts it), else None: nothing is computed or counted."""
        found = self._done.get(key)
        if found is None:
            return None
        value, at = found
        age = self.clock() - at
        if age > (self.max_age_s if max_age_s is None else max_age_s):
            return None
        self._done.move_to_end(key)
        self.stats.cached += 1
        return value, "cached", age

    async def get(
        self,
        key: Hashable,
        compute: Callable[[], Awaitable[Any]],
        max_age_s: float | None = None,
        family: Hashable | None = None,
        wait: bool = True,
    ) -> tuple[Any, How, float] | None:
        """``(value, how, age_s)`` of ``key``; ``compute()`` runs only when no fresh value
        is cached and no computation of the key is under way. ``max_age_s`` overrides the
        cache's own for this lookup (a final answer may be kept longer).

        ``family``: keys that answer the same question over newer data share one (the
        question without the speed progress); while ``key`` is computed, the family's
        newest value, if at most ``stale_s`` old, is answered at once (``stale``).

        ``wait=False``: None where the caller would wait for the computation. Nothing is
        started then, unless a stale value is answered: its successor is started as for any
        other caller.
        """
        kept = self.peek(key, max_age_s)
        if kept is not None:
            return kept
        now = self.clock()
        self._done.pop(key, None)  # too old, if there
        stale = None
        if family is not None and self.stale_s:
            newest = self._newest.get(family)
            if newest is not None and now - newest[1] <= self.stale_s:
                stale = newest
        running = self._running.get(key)
        if stale is None and not wait:
            return None
        how: How = "shared"
        if running is None:
            running = asyncio.ensure_future(self._compute(key, compute, family))
            running.add_done_callback(_retrieved)
            self._running[key] = running
            how = "computed"
        if stale is not None:
            self.stats.stale += 1
            return stale[0], "stale", now - stale[1]
        if how == "shared":
            self.stats.shared += 1
        # A caller that goes away (a closed connection) leaves the computation running for
        # the others: it is a task of its own.
        value, at = await asyncio.shield(running)
        return value, how, 0.0 if how == "computed" else max(0.0, self.clock() - at)

    async def _compute(
        self, key: Hashable, compute: Callable[[], Awaitable[Any]], family: Hashable | None
    ):
        try:
            value = await compute()  # a failure is not kept: its waiters get it, nobody else
            at = self.clock()
            self.stats.computed += 1
            if self.entries:
                self._done[key] = (value, at)
                if len(self._done) > self.entries:
                    self._done.popitem(last=False)
                    self.stats.evicted += 1
                if family is not None and self.stale_s:
                    self._newest[family] = (value, at)
                    self._newest.move_to_end(family)
                    if len(self._newest) > self.entries:
                        self._newest.popitem(last=False)
            return value, at
        finally:
            del self._running[key]


def _retrieved(task: asyncio.Future) -> None:
    if not task.cancelled():
        task.exception()  # read, so an error whose callers all left is not logged as lost
