"""Shared answers: computed once per key, shared by concurrent requests, never past their age;
and the top-N blocks that may be kept."""

from __future__ import annotations

import asyncio

import pytest

from serving.cache import SharedCache
from serving.plan import WindowRead
from serving.ranking import blocks
from serving.timerange import HOUR_MS, MINUTE_MS


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _counting(value="answer", delay=0.0):
    calls = []

    async def compute():
        calls.append(1)
        await asyncio.sleep(delay)
        return f"{value}#{len(calls)}"

    return compute, calls


def test_concurrent_identical_requests_compute_once_and_share() -> None:
    cache = SharedCache(entries=8, max_age_s=10)
    compute, calls = _counting(delay=0.01)

    async def many():
        return await asyncio.gather(*(cache.get("q", compute) for _ in range(50)))

    got = asyncio.run(many())
    assert len(calls) == 1
    assert {value for value, _, _ in got} == {"answer#1"}
    assert [how for _, how, _ in got].count("computed") == 1
    assert cache.stats.shared == 49 and cache.stats.computed == 1


def test_a_kept_answer_is_reused_until_its_age_runs_out() -> None:
    clock = Clock()
    cache = SharedCache(entries=8, max_age_s=10, clock=clock)
    compute, calls = _counting()

    async def ask(max_age=None):
        return await cache.get("q", compute, max_age)

    assert asyncio.run(ask())[:2] == ("answer#1", "computed")
    clock.now = 9.5
    value, how, age = asyncio.run(ask())
    assert (value, how, age) == ("answer#1", "cached", 9.5)
    assert asyncio.run(ask(max_age=5))[:2] == ("answer#2", "computed")  # too old for this one
    clock.now = 30
    assert asyncio.run(ask())[:2] == ("answer#3", "computed")
    assert len(calls) == 3


def test_distinct_keys_are_distinct_answers_and_the_oldest_is_evicted() -> None:
    cache = SharedCache(entries=2, max_age_s=60)

    async def run():
        for key in ("a", "b", "a", "c"):  # "a" used again: "b" is the least recent
            await cache.get(key, lambda key=key: _value(key))
        return await cache.get("b", lambda: _value("b again"))

    assert asyncio.run(run())[:2] == ("b again", "computed")
    assert cache.stats.evicted == 2 and len(cache) == 2


async def _value(text: str) -> str:
    return text


def test_a_failure_reaches_every_waiter_and_is_not_kept() -> None:
    cache = SharedCache(entries=8, max_age_s=60)
    attempts = []

    async def failing():
        attempts.append(1)
        await asyncio.sleep(0.01)
        raise RuntimeError("Cassandra timed out")

    async def run():
        return await asyncio.gather(
            *(cache.get("q", failing) for _ in range(3)), return_exceptions=True
        )

    errors = asyncio.run(run())
    assert [str(e) for e in errors] == ["Cassandra timed out"] * 3 and len(attempts) == 1
    assert len(cache) == 0
    with pytest.raises(RuntimeError):
        asyncio.run(cache.get("q", failing))
    assert len(attempts) == 2


def test_a_caller_that_goes_away_leaves_the_computation_to_the_others() -> None:
    cache = SharedCache(entries=8, max_age_s=60)
    compute, calls = _counting(delay=0.05)

    async def run():
        first = asyncio.ensure_future(cache.get("q", compute))
        await asyncio.sleep(0.01)
        second = asyncio.ensure_future(cache.get("q", compute))
        first.cancel()  # its connection closed
        return await second

    value, how, _ = asyncio.run(run())
    assert (value, how, len(calls)) == ("answer#1", "shared", 1)


def test_nothing_kept_still_shares_concurrent_requests() -> None:
    cache = SharedCache(entries=0, max_age_s=60)
    compute, calls = _counting(delay=0.01)

    async def run():
        await asyncio.gather(*(cache.get("q", compute) for _ in range(5)))
        await cache.get("q", compute)

    asyncio.run(run())
    assert len(calls) == 2 and len(cache) == 0


def test_blocks_keep_batch_runs_and_closed_speed_hours_but_not_open_minutes() -> None:
    day = 86_400_000
    reads = [
        WindowRead("batch", day - 2 * MINUTE_MS, 1),
        WindowRead("batch", day - MINUTE_MS, 1),
        WindowRead("batch", day, 2, "day"),
        WindowRead("batch", 2 * day, 3, "hour"),
        *(WindowRead("speed", 2 * day + HOUR_MS + m * MINUTE_MS, 0) for m in range(62)),
    ]
    watermark = 2 * day + HOUR_MS + 61 * MINUTE_MS  # the last minute is still open
    got = blocks(reads, watermark)
    assert [(cacheable, len(run), run[0].grain) for cacheable, run in got] == [
        (True, 2, "minute"),
        (True, 1, "day"),
        (True, 1, "hour"),
        (True, 60, "minute"),  # one closed speed hour
        (True, 1, "minute"),  # the next hour's closed minute
        (False, 1, "minute"),
    ]
    assert [run for cacheable, run in blocks(reads[4:], None)] == [tuple(reads[4:])]


def test_the_newest_answer_of_a_family_is_answered_while_its_successor_is_computed() -> None:
    clock = Clock()
    cache = SharedCache(entries=8, max_age_s=60, clock=clock, stale_s=5)
    old, _ = _counting("micro-batch 1")
    new, new_calls = _counting("micro-batch 2", delay=0.01)

    async def run():
        await cache.get(("q", 1), old, family="q")
        clock.now = 2.0
        during = await cache.get(("q", 2), new, family="q")  # starts the computation
        also = await cache.get(("q", 2), new, family="q")
        await asyncio.sleep(0.05)
        after = await cache.get(("q", 2), new, family="q")
        return during, also, after

    during, also, after = asyncio.run(run())
    assert during == ("micro-batch 1#1", "stale", 2.0) and also[1] == "stale"
    assert after[:2] == ("micro-batch 2#1", "cached") and len(new_calls) == 1


def test_a_stale_answer_too_old_or_of_another_family_is_not_answered() -> None:
    clock = Clock()
    cache = SharedCache(entries=8, max_age_s=60, clock=clock, stale_s=5)
    first, _ = _counting("before")
    second, _ = _counting("after")

    async def run():
        await cache.get(("q", 1), first, family="q")
        clock.now = 6.0  # older than stale_s: wait for the new one
        late = await cache.get(("q", 2), second, family="q")
        other = await cache.get(("p", 2), second, family="p")  # a family of its own
        return late, other

    late, other = asyncio.run(run())
    assert late[1] == "computed" and other[1] == "computed"


def test_peek_answers_only_what_is_kept_and_counts_it_as_get_does() -> None:
    clock = Clock()
    cache = SharedCache(entries=8, max_age_s=10, clock=clock)
    compute, calls = _counting()
    assert cache.peek("q") is None and cache.stats.cached == 0
    asyncio.run(cache.get("q", compute))
    clock.now = 4.0
    assert cache.peek("q") == ("answer#1", "cached", 4.0)
    assert cache.peek("q", max_age_s=3) is None  # too old for this caller, kept for others
    clock.now = 11.0
    assert cache.peek("q") is None
    assert (len(calls), cache.stats.cached, cache.stats.computed) == (1, 1, 1)


def test_a_caller_that_will_not_wait_gets_what_is_kept_or_stale_and_starts_no_wait() -> None:
    clock = Clock()
    cache = SharedCache(entries=8, max_age_s=60, clock=clock, stale_s=5)
    old, _ = _counting("micro-batch 1")
    new, new_calls = _counting("micro-batch 2", delay=0.01)

    async def run():
        nothing = await cache.get(("p", 1), new, family="p", wait=False)  # starts nothing
        waited = await cache.get(("p", 1), new, family="p")
        await cache.get(("q", 1), old, family="q")
        clock.now = 2.0
        during = await cache.get(("q", 2), new, family="q", wait=False)  # starts the new one
        await asyncio.sleep(0.05)
        after = await cache.get(("q", 2), new, family="q", wait=False)
        return nothing, waited, during, after

    nothing, waited, during, after = asyncio.run(run())
    assert nothing is None and waited == ("micro-batch 2#1", "computed", 0.0)
    assert during == ("micro-batch 1#1", "stale", 2.0)
    assert after[:2] == ("micro-batch 2#2", "cached") and len(new_calls) == 2
