"""Where the batch boundary lands: the end of the newest UTC period complete at ``as_of``,
never past the speed layer's watermark."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from batch_layer.publish import boundary_for, held_to_watermark


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


def test_an_event_inside_the_watermark_but_older_than_the_lateness_stays_on_the_speed_side():
    # The newest event is 10:07; the speed layer's watermark is 10 minutes behind it. An
    # event of 10:00 arriving now is counted by the speed layer, so its window must not
    # lie before the boundary, which the as_of rule alone (10:02) would put after it.
    as_of = utc(2024, 5, 1, 10, 7, 30)
    watermark = utc(2024, 5, 1, 9, 57)
    event = utc(2024, 5, 1, 10)
    by_as_of = boundary_for(as_of, 300, "minute")
    assert by_as_of == utc(2024, 5, 1, 10, 2) > event
    assert held_to_watermark(by_as_of, watermark, "minute") == utc(2024, 5, 1, 9, 57) <= event


@pytest.mark.parametrize("period", ["minute", "hour", "day"])
def test_every_event_the_speed_layer_counts_lies_at_or_after_the_held_boundary(period):
    size = {"minute": 60, "hour": 3600, "day": 86400}[period]
    for step in range(0, 2 * 86400, 541):  # ~320 instants over two days
        as_of = utc(2024, 5, 1, 0, 0, 13) + timedelta(seconds=step)
        by_as_of = boundary_for(as_of, 300, period)
        for behind_s in (0, 299, 600, 601, 3600, 5 * 86400):
            watermark = as_of - timedelta(seconds=behind_s, microseconds=1)
            boundary = held_to_watermark(by_as_of, watermark, period)
            assert boundary <= by_as_of and boundary <= watermark
            assert boundary.timestamp() % size == 0 and boundary.utcoffset() == timedelta(0)
            # the speed layer counts an event at the watermark: its minute is not hidden
            assert watermark.replace(second=0, microsecond=0) >= boundary
            # and the boundary is held no further back than the watermark's period
            assert boundary == by_as_of or boundary + timedelta(seconds=size) > watermark


def test_a_watermark_past_the_as_of_rule_or_no_speed_layer_keeps_the_as_of_rule():
    by_as_of = utc(2024, 5, 1, 10)
    assert held_to_watermark(by_as_of, utc(2024, 5, 1, 10, 30), "hour") == by_as_of
    assert held_to_watermark(by_as_of, utc(2024, 5, 1, 10), "minute") == by_as_of
    assert held_to_watermark(by_as_of, None, "hour") == by_as_of


def test_a_watermark_that_never_moved_holds_the_boundary_at_the_epoch():
    # A speed layer that has seen no event yet counts events of any time.
    epoch = utc(1970, 1, 1)
    assert held_to_watermark(utc(2024, 5, 1, 10), epoch, "day") == epoch


def test_the_watermark_is_floored_to_utc_periods_whatever_its_zone():
    watermark = datetime(2024, 5, 1, 12, 40, tzinfo=timezone(timedelta(hours=5, minutes=30)))
    assert held_to_watermark(utc(2024, 5, 2), watermark, "hour") == utc(2024, 5, 1, 7)
    with pytest.raises(ValueError, match="no time zone"):
        held_to_watermark(utc(2024, 5, 2), datetime(2024, 5, 1, 7, 10), "hour")
