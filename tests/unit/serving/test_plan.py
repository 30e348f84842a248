"""Which partitions answer a range: the batch boundary split."""

from __future__ import annotations

from datetime import UTC, date, datetime
from itertools import pairwise

from serving.plan import bucket_source, key_reads, minute_reads
from serving.timerange import MINUTE_MS, to_ms


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
    minutes = minute_reads(_t(9, 59), _t(10, 1), _t(10), VERSIONS, speed_version=3)
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
    assert minute_reads(_t(9), _t(9), _t(10), VERSIONS) == []


def test_minute_reads_cover_each_window_start_once() -> None:
    reads = minute_reads(_t(9, 58) - 1, _t(10, 2) + 1, boundary=_t(10), versions=VERSIONS)
    assert [(r.layer, r.minute) for r in reads] == [
        ("batch", _t(9, 58)),
        ("batch", _t(9, 59)),
        ("speed", _t(10)),
        ("speed", _t(10, 1)),
        ("speed", _t(10, 2)),
    ]
    assert reads[0].version == 11
    # A window that started before the range is not in it.
    assert minute_reads(_t(9, 58) + 1, _t(9, 59) + 1, None, {})[0].minute == _t(9, 59)
    assert len(minute_reads(_t(9), _t(10), None, {})) == 60 and MINUTE_MS == 60_000


def test_bucket_sources() -> None:
    assert bucket_source(_t(8), _t(9), _t(10)) == "batch"
    assert bucket_source(_t(9), _t(11), _t(10)) == "mixed"
    assert bucket_source(_t(10), _t(11), _t(10)) == "speed"
    assert bucket_source(_t(8), _t(9), None) == "speed"
