"""The SQL server reads again only the speed minutes that can still change."""

from __future__ import annotations

from serving.sql import FinalRows, SpeedRows, rows_since

MIN = 60_000


class Store:
    """Speed rows by minute in a version of the speed tables; records what was read."""

    def __init__(self, version: int = 1) -> None:
        self.version = version
        self.rows: dict[int, list[tuple]] = {}
        self.reads: list[tuple[int, int]] = []

    def read(self, lo: int, hi: int) -> tuple[int, list[tuple]]:
        self.reads.append((lo, hi))
        start = -(-lo // MIN) * MIN
        return self.version, [r for m in range(start, hi, MIN) for r in self.rows.get(m, [])]


def _everything(store: Store, lo: int, hi: int) -> list[tuple]:
    return sorted(Store.read(store, lo, hi)[1])


def test_every_refresh_answers_what_a_whole_read_answers_and_reads_only_open_minutes():
    store = Store()
    final, previous = None, 0
    for now in range(10 * MIN, 40 * MIN, 3 * MIN):
        watermark = now - 10 * MIN
        for m in range(watermark, now, MIN):  # the speed layer writes minutes at or after it
            store.rows[m] = [(m, f"written at {now}")]
        store.reads.clear()
        rows, final = rows_since(store.read, final, 0, now + MIN, watermark)
        assert sorted(rows) == _everything(store, 0, now + MIN)
        assert store.reads[0][0] >= previous - 2 * MIN  # the last refresh's open minutes
        assert all(m < watermark - MIN for (m, _) in final.rows)
        previous = watermark


def test_rows_before_the_range_are_left_out_as_the_range_moves():
    store = Store()
    store.rows = {m * MIN: [(m * MIN, "x")] for m in range(10)}
    _, final = rows_since(store.read, None, 0, 10 * MIN, watermark=9 * MIN)
    rows, _ = rows_since(store.read, final, 5 * MIN, 10 * MIN, watermark=9 * MIN)
    assert sorted(rows) == [(m * MIN, "x") for m in range(5, 10)]


def test_a_new_version_is_read_whole_and_kept_only_from_the_next_refresh():
    store = Store(version=1)
    store.rows = {m * MIN: [(m * MIN, "old")] for m in range(10)}
    _, final = rows_since(store.read, None, 0, 10 * MIN, watermark=9 * MIN)
    assert final.until == 8 * MIN  # minute 7 ended at 8, a minute before the watermark
    store.version, store.rows = 2, {m * MIN: [(m * MIN, "new")] for m in range(10)}
    store.reads.clear()
    rows, final = rows_since(store.read, final, 0, 10 * MIN, watermark=9 * MIN)
    assert sorted(rows) == [(m * MIN, "new") for m in range(10)]
    assert store.reads[-1] == (0, 10 * MIN)
    assert final == FinalRows(version=2, until=0)
    store.reads.clear()
    rows, final = rows_since(store.read, final, 0, 10 * MIN, watermark=9 * MIN)
    assert store.reads == [(0, 10 * MIN)] and final.until == 8 * MIN


def test_a_refresh_reads_nothing_while_the_speed_layer_wrote_nothing():
    store = Store()
    store.rows = {m * MIN: [(m * MIN, "x")] for m in range(10)}
    speed = SpeedRows()
    first = speed.rows(store.read, "written at 1", 0, 0, 10 * MIN)
    speed.shown()
    store.reads.clear()
    for hi in (10 * MIN, 11 * MIN, 12 * MIN):
        assert speed.rows(store.read, "written at 1", 0, 0, hi) == first
        assert not speed.changed
    assert store.reads == [] and (speed.reads, speed.kept) == (1, 3)
    store.rows[10 * MIN] = [(10 * MIN, "y")]  # a micro-batch writes, then records progress
    rows = speed.rows(store.read, "written at 2", 0, 0, 12 * MIN)
    assert store.reads and speed.changed
    assert sorted(rows) == _everything(store, 0, 12 * MIN)


def test_rows_written_ahead_of_now_are_kept_for_the_refresh_whose_range_reaches_them():
    store = Store()
    store.rows = {m * MIN: [(m * MIN, "x")] for m in range(12)}  # minute 11: a clock ahead
    speed = SpeedRows()
    assert len(speed.rows(store.read, "same", 0, 0, 10 * MIN, ahead=2 * MIN)) == 10
    speed.shown()
    rows = speed.rows(store.read, "same", 0, 0, 12 * MIN, ahead=2 * MIN)
    assert sorted(rows) == _everything(store, 0, 12 * MIN) and speed.reads == 1
    assert speed.changed  # minutes 10 and 11 entered the range: a new snapshot


def test_rows_leaving_the_range_change_the_snapshot_without_a_read():
    store = Store()
    store.rows = {m * MIN: [(m * MIN, "x")] for m in range(10)}
    speed = SpeedRows()
    speed.rows(store.read, "same", 0, 0, 10 * MIN)
    speed.shown()
    rows = speed.rows(store.read, "same", 0, 3 * MIN, 10 * MIN)
    assert sorted(rows) == _everything(store, 3 * MIN, 10 * MIN)
    assert speed.changed and speed.reads == 1


def test_a_range_that_starts_earlier_is_read_whole():
    store = Store()
    store.rows = {m * MIN: [(m * MIN, "x")] for m in range(10)}
    speed = SpeedRows()
    speed.rows(store.read, "same", 9 * MIN, 5 * MIN, 10 * MIN)
    store.reads.clear()
    rows = speed.rows(store.read, "same", 9 * MIN, 2 * MIN, 10 * MIN)
    assert store.reads == [(2 * MIN, 10 * MIN)]
    assert sorted(rows) == _everything(store, 2 * MIN, 10 * MIN)


def test_a_snapshot_that_was_not_shown_is_still_a_change():
    store = Store()
    store.rows = {0: [(0, "x")]}
    speed = SpeedRows()
    speed.rows(store.read, "a", 0, 0, MIN)
    speed.shown()
    speed.rows(store.read, "b", 0, 0, MIN)  # read again; its snapshot failed to be written
    speed.rows(store.read, "b", 0, 0, MIN)
    assert speed.changed and speed.reads == 2
