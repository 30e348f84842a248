"""Where the batch boundary lands: the end of the newest UTC period complete at ``as_of``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from batch_layer.publish import boundary_for


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


AS_OF = utc(2024, 5, 1, 10, 7, 30, 250_000)


@pytest.mark.parametrize(
    ("as_of", "lateness_s", "period", "expected"),
    [
        (AS_OF, 0, "minute", utc(2024, 5, 1, 10, 7)),
        (AS_OF, 31, "minute", utc(2024, 5, 1, 10, 6)),
        (AS_OF, 300, "hour", utc(2024, 5, 1, 10)),
        (AS_OF, 3600, "hour", utc(2024, 5, 1, 9)),
        (AS_OF, 0, "day", utc(2024, 5, 1)),
        (AS_OF, 11 * 3600, "day", utc(2024, 4, 30)),
        # late enough to cross a year (and a leap day)
        (utc(2025, 1, 1, 0, 4), 300, "day", utc(2024, 12, 31)),
        (utc(2024, 3, 1, 0, 0, 1), 2, "day", utc(2024, 2, 29)),
    ],
)
def test_periods_and_lateness(as_of, lateness_s, period, expected):
    assert boundary_for(as_of, lateness_s, period) == expected


def test_at_an_exact_period_edge_the_period_just_ended_is_complete():
    # as_of - lateness == 10:00:00 exactly: [09:00, 10:00) is complete, [10:00, 11:00) is not.
    assert boundary_for(utc(2024, 5, 1, 10, 5), 300, "hour") == utc(2024, 5, 1, 10)
    # one microsecond earlier, and 09:00 is the newest complete end
    early = utc(2024, 5, 1, 10, 5) - timedelta(microseconds=1)
    assert boundary_for(early, 300, "hour") == utc(2024, 5, 1, 9)
    assert boundary_for(utc(2024, 5, 2), 0, "day") == utc(2024, 5, 2)
    assert boundary_for(utc(2024, 5, 1, 10, 8), 60, "minute") == utc(2024, 5, 1, 10, 7)


@pytest.mark.parametrize("period", ["minute", "hour", "day"])
def test_the_boundary_never_passes_as_of_minus_lateness_and_never_goes_back(period):
    size = {"minute": 60, "hour": 3600, "day": 86400}[period]
    previous = None
    for step in range(0, 3 * 86400, 397):  # ~650 instants over three days
        as_of = utc(2024, 5, 1, 0, 0, 13) + timedelta(seconds=step)
        boundary = boundary_for(as_of, 300, period)
        assert boundary.tzinfo is not None and boundary.utcoffset() == timedelta(0)
        assert boundary <= as_of - timedelta(seconds=300) < boundary + timedelta(seconds=size)
        assert boundary.timestamp() % size == 0
        assert previous is None or boundary >= previous
        previous = boundary


@pytest.mark.parametrize(
    "zone",
    [
        timezone(timedelta(hours=5, minutes=30)),  # a half-hour offset (India)
        timezone(timedelta(hours=-7)),
        ZoneInfo("Europe/Berlin"),
    ],
)
@pytest.mark.parametrize("period", ["minute", "hour", "day"])
def test_periods_are_utc_whatever_the_zone_of_as_of(zone, period):
    local = AS_OF.astimezone(zone)
    boundary = boundary_for(local, 300, period)
    assert boundary == boundary_for(AS_OF, 300, period)
    assert boundary.utcoffset() == timedelta(0)


def test_lateness_is_real_time_across_a_daylight_saving_change():
    # Berlin skipped 02:00-03:00 on 2024-03-31: 03:10 CEST is 01:10Z, 1h10 after 00:00Z.
    as_of = datetime(2024, 3, 31, 3, 10, tzinfo=ZoneInfo("Europe/Berlin"))
    assert boundary_for(as_of, 3600, "hour") == utc(2024, 3, 31, 0)


def test_a_naive_as_of_is_refused():
    with pytest.raises(ValueError, match="no time zone"):
        boundary_for(datetime(2024, 5, 1, 10, 7), 300, "hour")


def test_an_unknown_period_says_which_exist():
    with pytest.raises(ValueError, match="Unknown period 'week': minute, hour or day"):
        boundary_for(AS_OF, 0, "week")
