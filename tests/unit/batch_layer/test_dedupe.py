"""The deduplication rule: first copy in the log, copies compared within a day of each other."""

from __future__ import annotations

from datetime import date

from batch_layer.dedupe import copies
from core.frames import local_frame

KEY = ("source_id", "event_id")
D = date(2024, 3, 1)


def _day(n: int) -> date:
    return date.fromordinal(D.toordinal() + n)


def _copies(spark, records, kept=()):
    records = local_frame(
        spark,
        [("s", event, p, o, _day(d)) for event, p, o, d in records],
        "source_id string, event_id string, partition int, offset long, event_date date",
    )
    kept = local_frame(
        spark,
        [("s", event, _day(d)) for event, d in kept],
        "source_id string, event_id string, event_date date",
    )
    return sorted((r.partition, r.offset) for r in copies(records, kept, KEY).collect())


def test_the_first_copy_in_the_log_is_kept_and_later_ones_within_a_day_dropped(spark):
    # "a": the copy at (0, 9) is the first in the log, though it arrived in a later position
    # of the list; the copy the next day is a retry across midnight, dropped too.
    records = [("a", 0, 12, 0), ("a", 0, 9, 0), ("a", 0, 30, 1), ("b", 1, 4, 0)]
    assert _copies(spark, records) == [(0, 12), (0, 30)]


def test_copies_two_days_apart_are_two_events(spark):
    records = [("a", 0, 5, 0), ("a", 0, 8, 2)]
    assert _copies(spark, records) == []


def test_a_chain_is_walked_by_what_was_kept(spark):
    # Day 0 kept; day 1 dropped (near day 0); day 2 is two days from the kept row: kept.
    records = [("a", 0, 1, 0), ("a", 0, 2, 1), ("a", 0, 3, 2)]
    assert _copies(spark, records) == [(0, 2)]


def test_a_row_silver_kept_in_an_earlier_run_comes_first(spark):
    # Silver holds "a" on day 1 and "b" on day 3: "a" on day 0 is a copy, "b" on day 0 is not.
    records = [("a", 0, 50, 0), ("b", 0, 51, 0), ("c", 0, 52, 0)]
    assert _copies(spark, records, kept=[("a", 1), ("b", 3)]) == [(0, 50)]
