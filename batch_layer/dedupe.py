"""Which records are copies of an event silver already keeps: the deduplication rule.

An event is identified by the contract's key ``(source_id, event_id)``. Silver
keeps each event's first copy in the log and drops the later ones, but only
compares copies whose event dates are **at most one day apart**:

- a record is a copy, and dropped, when silver already holds its key on its
  own event day or on the day before or after (kept by an earlier run), or
  when a record of the same run that comes earlier in the log (by
  ``(partition, offset)``) and was kept has its key within one day of it;
- copies two or more days apart are separate events, each kept on its day.

Why one day: a client retry carries the same client timestamp, and its
corrected event time moves by the difference in network delay (seconds), so
a retry sent around midnight can fall on the next day and must still be one
event (the speed layer, which drops a key seen within its watermark, also
counts it once). A copy days apart is not a retry either layer could
recognise. Scoping the comparison to the neighbouring days is what lets a
run read the keys of the days it touches (and their neighbours) instead of
all of silver, and a backfill of a day read only that day's candidates; the
rule gives the same rows whatever the order of the runs that built them.

This module only builds the Spark plan; :mod:`batch_layer.silver` runs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["NEAR_DAYS", "copies", "neighbour_days"]

NEAR_DAYS = 1
"""Copies whose event dates differ by at most this many days are one event."""

_DROP = f"""aggregate(
  copies,
  named_struct(
    'days', coalesce(kept, cast(array() as array<date>)),
    'drop', cast(array() as array<struct<partition:int, offset:bigint>>)
  ),
  (acc, c) -> if(
    exists(acc.days, d -> abs(datediff(c.event_date, d)) <= {NEAR_DAYS}),
    named_struct(
      'days', acc.days,
      'drop', concat(acc.drop, array(named_struct('partition', c.partition, 'offset', c.offset)))
    ),
    named_struct('days', concat(acc.days, array(c.event_date)), 'drop', acc.drop)
  )
).drop"""
"""Walk a key's records in log order; keep one unless a kept copy is within a day."""


def neighbour_days(days: Sequence[date]) -> tuple[date, ...]:
    """``days`` and the days next to them, within :data:`NEAR_DAYS`.

    >>> [d.day for d in neighbour_days([date(2024, 3, 1), date(2024, 3, 5)])]
    [29, 1, 2, 4, 5, 6]
    """
    near = {d + timedelta(days=n) for d in days for n in range(-NEAR_DAYS, NEAR_DAYS + 1)}
    return tuple(sorted(near))


def copies(records: DataFrame, kept: DataFrame, key: Sequence[str]) -> DataFrame:
    """``(partition, offset)`` of the ``records`` that are copies, by the module's rule.

    ``records``: the run's valid events, with the ``key`` columns,
    ``event_date``, ``partition`` and ``offset``. ``kept``: the ``key`` and
    ``event_date`` of the rows silver keeps from earlier runs on the days
    near the records' (they come before every record of the run). Only keys
    with more than one record, or with a kept row, are walked: one shuffle of
    the key columns, never of the events.
    """
    from pyspark.sql import functions as F

    run = records.groupBy(*key).agg(
        F.array_sort(F.collect_list(F.struct("partition", "offset", "event_date"))).alias("copies")
    )
    earlier = kept.groupBy(*key).agg(F.collect_set("event_date").alias("kept"))
    return (
        run.join(earlier, list(key), "left")
        .where((F.size("copies") > 1) | F.col("kept").isNotNull())
        .select(F.explode(F.expr(_DROP)).alias("copy"))
        .select("copy.partition", "copy.offset")
    )
