"""Which partitions answer a range: the batch boundary split, and the coarsest grain first."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime
from itertools import pairwise

from serving.plan import GRAIN_MS, bucket_source, grain_pieces, key_reads, window_reads
from serving.timerange import DAY_MS, HOUR_MS, MINUTE_MS, day_of, to_ms


def _t(hour: int, minute: int = 0, day: int = 1) -> int:
    return to_ms(datetime(2024, 1, day, hour, minute, tzinfo=UTC))


DAY1, DAY2 = date(2024, 1, 1), date(2024, 1, 2)
VERSIONS = {DAY1: 11, DAY2: 22}


def test_range_entirely_before_the_boundary_reads_batch_only() -> None:
    reads = key_reads(_t(8), _t(9), boundary=_t(10), versions=VERSIONS)
    assert [(r.layer, r.day, r.version, r.lo, r.hi) for r in reads] == [
        ("batch", DAY1, 11, _t(8), _t(9))
    ]


def test_range_entirely_after_the_boundary_reads_speed_only() -> None:
    reads = key_reads(_t(11), _t(12), boundary=_t(10), versions=VERSIONS)
    assert [(r.layer, r.version, r.lo, r.hi) for r in reads] == [("speed", 0, _t(11), _t(12))]


def test_speed_reads_name_the_version_the_pointer_gives() -> None:
    reads = key_reads(_t(9, 30), _t(10, 30), boundary=_t(10), versions=VERSIONS, speed_version=3)
    assert {(r.layer, r.version) for r in reads} == {("batch", 11), ("speed", 3)}
    minutes = window_reads(_t(9, 59), _t(10, 1), _t(10), VERSIONS, speed_version=3)
    assert [(r.layer, r.version) for r in minutes] == [("batch", 11), ("speed", 3)]


def test_straddling_range_splits_exactly_at_the_boundary() -> None:
    reads = key_reads(_t(9, 30), _t(10, 30), boundary=_t(10), versions=VERSIONS)
    assert [(r.layer, r.lo, r.hi) for r in reads] == [
        ("batch", _t(9, 30), _t(10)),
        ("speed", _t(10), _t(10, 30)),
    ]


def test_windows_never_come_from_both_layers() -> None:
    lo, hi, boundary = _t(22, day=1), _t(2, day=2), _t(0, 17, day=2)
    reads = key_reads(lo, hi, boundary, VERSIONS)
    covered = sorted((r.lo, r.hi) for r in reads)
    assert covered[0][0] == lo and covered[-1][1] == hi
    for (_, end), (start, _) in pairwise(covered):
        assert end == start  # contiguous, no overlap
    assert all(r.hi <= boundary for r in reads if r.layer == "batch")
    assert all(r.lo >= boundary for r in reads if r.layer == "speed")
    assert {(r.layer, r.day) for r in reads} == {
        ("batch", DAY1),
        ("batch", DAY2),
        ("speed", DAY2),
    }


def test_a_batch_day_without_a_version_has_no_events() -> None:
    reads = key_reads(_t(22, day=1), _t(2, day=2), _t(1, day=2), versions={DAY2: 22})
    assert [(r.layer, r.day) for r in reads] == [("batch", DAY2), ("speed", DAY2)]


def test_a_view_whose_batch_never_ran_is_all_speed() -> None:
    reads = key_reads(_t(8), _t(9), boundary=None, versions={})
    assert [(r.layer, r.lo, r.hi) for r in reads] == [("speed", _t(8), _t(9))]


def test_an_empty_range_reads_nothing() -> None:
    assert key_reads(_t(9), _t(9), _t(10), VERSIONS) == []
    assert window_reads(_t(9), _t(9), _t(10), VERSIONS) == []


def test_window_reads_cover_each_window_start_once() -> None:
    reads = window_reads(_t(9, 58) - 1, _t(10, 2) + 1, boundary=_t(10), versions=VERSIONS)
    assert [(r.layer, r.start) for r in reads] == [
        ("batch", _t(9, 58)),
        ("batch", _t(9, 59)),
        ("speed", _t(10)),
        ("speed", _t(10, 1)),
        ("speed", _t(10, 2)),
    ]
    assert reads[0].version == 11
    # A window that started before the range is not in it.
    assert window_reads(_t(9, 58) + 1, _t(9, 59) + 1, None, {})[0].start == _t(9, 59)
    assert len(window_reads(_t(9), _t(10), None, {})) == 60 and MINUTE_MS == 60_000


def test_bucket_sources() -> None:
    assert bucket_source(_t(8), _t(9), _t(10)) == "batch"
    assert bucket_source(_t(9), _t(11), _t(10)) == "mixed"
    assert bucket_source(_t(10), _t(11), _t(10)) == "speed"
    assert bucket_source(_t(8), _t(9), None) == "speed"


# -- rollups: the coarsest grain covering each part --------------------------------------------

DAYS = {date(2024, 1, d): 100 + d for d in range(1, 8)}


def _minutes(reads) -> list[tuple[str, int, int]]:
    """Every minute window a plan reads, with its layer and version (a read at a coarser
    grain stands for each minute it covers)."""
    out = []
    for r in reads:
        lo, hi = (r.start, r.end) if hasattr(r, "start") else (r.lo, r.hi)
        out += [(r.layer, m, r.version) for m in range(lo, hi, MINUTE_MS)]
    return out


def _expected(lo: int, hi: int, boundary: int | None, versions, speed_version=0):
    """The rule itself, window by window: batch before the boundary (when the day has a
    version), speed from it."""
    first = -(-lo // MINUTE_MS) * MINUTE_MS
    out = []
    for m in range(first, hi, MINUTE_MS):
        if boundary is not None and m < boundary:
            if day_of(m) in versions:
                out.append(("batch", m, versions[day_of(m)]))
        else:
            out.append(("speed", m, speed_version))
    return out


def test_grain_pieces_take_whole_days_then_whole_hours_then_minutes() -> None:
    lo, hi = _t(22, 30, day=1), _t(1, 15, day=3)
    assert [(g, a, b) for g, a, b in grain_pieces(lo, hi)] == [
        ("minute", _t(22, 30, day=1), _t(23, day=1)),
        ("hour", _t(23, day=1), _t(0, day=2)),
        ("day", _t(0, day=2), _t(0, day=3)),
        ("hour", _t(0, day=3), _t(1, day=3)),
        ("minute", _t(1, day=3), _t(1, 15, day=3)),
    ]
    assert [g for g, _, _ in grain_pieces(lo, hi, "hour")] == ["minute", "hour", "minute"]
    assert grain_pieces(lo, hi, "minute") == [("minute", lo, hi)]


def test_a_month_of_batch_windows_is_a_few_hundred_partitions_not_forty_thousand() -> None:
    versions = {date(2024, 1, d): d for d in range(1, 32)} | {date(2024, 2, 1): 32}
    lo, hi = _t(10, 17, day=1), to_ms(datetime(2024, 1, 31, 10, 17, tzinfo=UTC))
    reads = window_reads(lo, hi, boundary=hi, versions=versions, rolled_up=set(versions))
    grains = [r.grain for r in reads]
    assert grains.count("day") == 29 and grains.count("hour") == 13 + 10
    assert grains.count("minute") == 43 + 17
    assert _minutes(reads) == _expected(lo, hi, hi, versions)


def test_a_day_published_without_rollups_is_read_from_its_minutes() -> None:
    lo, hi = _t(0, day=1), _t(0, day=4)
    rolled_up = {date(2024, 1, 1), date(2024, 1, 3)}
    reads = key_reads(lo, hi, hi, DAYS, rolled_up=rolled_up, coarsest="day")
    assert [(r.day.day, r.grain) for r in reads] == [(1, "day"), (2, "minute"), (3, "day")]
    assert [r.version for r in reads] == [101, 102, 103]


def test_a_timeseries_never_reads_coarser_than_its_buckets() -> None:
    reads = key_reads(_t(0, day=1), _t(0, day=3), None, {}, coarsest="hour")
    assert {r.grain for r in reads} == {"minute"}  # speed windows are minutes
    reads = key_reads(
        _t(0, day=1), _t(0, day=3), _t(0, day=3), DAYS, rolled_up=set(DAYS), coarsest="hour"
    )
    assert {r.grain for r in reads} == {"hour"}


def test_every_window_is_read_once_from_the_layer_the_boundary_gives() -> None:
    rng = random.Random(7)
    start = _t(0, day=1)
    for _ in range(300):
        lo = start + rng.randrange(0, 6 * DAY_MS, rng.choice((1, 1000, MINUTE_MS, HOUR_MS)))
        hi = lo + rng.randrange(0, 3 * DAY_MS, rng.choice((1, MINUTE_MS, HOUR_MS)))
        boundary = rng.choice([None, lo + rng.randrange(-DAY_MS, 2 * DAY_MS, MINUTE_MS // 2)])
        versions = {d: v for d, v in DAYS.items() if rng.random() < 0.8}
        rolled_up = {d for d in versions if rng.random() < 0.7}
        expected = _expected(lo, hi, boundary, versions, speed_version=2)
        for plan in (window_reads, key_reads):
            grains = ("day",) if plan is window_reads else ("minute", "hour", "day")
            for coarsest in grains:
                reads = plan(lo, hi, boundary, versions, 2, rolled_up, coarsest)
                assert _minutes(reads) == expected, (plan.__name__, lo, hi, boundary)
                for r in reads:
                    day = r.day if plan is key_reads else day_of(r.start)
                    if r.grain != "minute":
                        assert r.layer == "batch" and day in rolled_up
                        assert GRAIN_MS[r.grain] <= GRAIN_MS[coarsest]
