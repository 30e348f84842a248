"""The speed layer's start positions, event-time bound and supervision, without services."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from core.frames import local_frame
from core.settings import LakeSettings, Settings, SpeedSettings
from speed_layer.service import supervise
from speed_layer.start import StartPosition, floor_of, parse_from, spark_offsets, window_seconds


def test_parse_from_accepts_the_three_forms_and_explains_the_rest():
    assert parse_from("latest") == "latest"
    assert parse_from("2026-11-23T08:00:00") == datetime(2026, 11, 23, 8, tzinfo=UTC)
    with pytest.raises(ValueError, match="earliest, latest or an ISO-8601 time"):
        parse_from("yesterday")


@pytest.mark.parametrize(
    ("start", "floor"),
    [
        (None, None),  # the whole log: every window is recomputed
        (datetime(2026, 1, 1, 10, 0, 0, tzinfo=UTC), datetime(2026, 1, 1, 10, 1, tzinfo=UTC)),
        (datetime(2026, 1, 1, 10, 0, 0, 1, tzinfo=UTC), datetime(2026, 1, 1, 10, 2, tzinfo=UTC)),
        (datetime(2026, 1, 1, 9, 59, 59, tzinfo=UTC), datetime(2026, 1, 1, 10, 1, tzinfo=UTC)),
    ],
)
def test_the_floor_is_the_first_whole_window_after_start_plus_tolerance(start, floor):
    assert floor_of(start, timedelta(seconds=60), 60) == floor


def test_window_lengths():
    assert [window_seconds(w) for w in ("1 minute", "10 seconds", "2 hours", "1 day")] == [
        60,
        10,
        7200,
        86400,
    ]
    with pytest.raises(ValueError, match="1 minute"):
        window_seconds("fortnight")


def test_each_run_has_its_own_checkpoints():
    settings = Settings(
        lake=LakeSettings(checkpoint_root="s3a://lake/checkpoints/"),
        speed=SpeedSettings(checkpoint_name="speed"),
    )
    assert StartPosition().checkpoint_dir(settings) == "s3a://lake/checkpoints/speed"
    assert StartPosition(generation=3).checkpoint_dir(settings) == "s3a://lake/checkpoints/speed.r3"
    assert spark_offsets("t", {1: 5, 0: 7}) == '{"t": {"0": 7, "1": 5}}'


class _Query:
    def __init__(self, name: str, active: bool, error: str | None = None) -> None:
        self.name, self.isActive, self._error = name, active, error

    def exception(self):
        return self._error


def test_supervise_reports_a_failure_even_when_every_query_ended():
    # Every query died between two polls (a Cassandra outage), or --drain ended them.
    queries = [_Query("a", False, "NoHostAvailable"), _Query("b", False), _Query("c", False)]
    assert [q.name for q in supervise(lambda: queries, threading.Event(), 0.01)] == ["a"]


def test_supervise_returns_no_failure_when_all_ended_cleanly_or_a_stop_was_asked():
    ended = [_Query("a", False), _Query("b", False)]
    assert supervise(lambda: ended, threading.Event(), 0.01) == []
    stopping = threading.Event()
    stopping.set()
    assert supervise(lambda: [_Query("a", True)], stopping, 0.01) == []


def test_supervise_waits_on_while_a_pipeline_has_no_query_at_all():
    """A live query let go while its replay had not started left no query: all([]) ended
    the job, with exit 0, as if stopped on purpose. Now it ticks on (the tick starts the
    replay) until a query ends or a stop is asked."""
    stopping, queries, ticks = threading.Event(), [], []

    def tick():
        ticks.append(1)
        if len(ticks) == 3:
            queries.append(_Query("replay", False, "its failure"))

    failed = supervise(lambda: list(queries), stopping, 0.01, tick)
    assert len(ticks) == 3
    assert [q.name for q in failed] == ["replay"]


def test_bound_event_time_drops_and_counts_the_future_and_what_lies_before_the_floor(spark):
    from pyspark.sql import Observation  # noqa: F401  (observe is what the stream uses)

    from speed_layer.job import EDGE_METRICS, bound_event_time

    now = datetime.now(UTC)
    rows = [
        ("ok", now - timedelta(minutes=5)),
        ("within tolerance", now + timedelta(seconds=30)),
        ("future", now + timedelta(minutes=5)),
        ("year 9999", datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)),
        ("before floor", now - timedelta(hours=2)),
    ]
    events = local_frame(spark, rows, "event_id string, event_time timestamp")
    floor = now - timedelta(hours=1)
    bounded = bound_event_time(events, 60, floor)
    kept = sorted(r.event_id for r in bounded.collect())
    assert kept == ["ok", "within tolerance"]
    plan = bounded._jdf.queryExecution().analyzed().toString()
    assert EDGE_METRICS in plan  # counted as observed metrics the progress recorder reads
