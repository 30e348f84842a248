"""Parsing ranges and bucketing instants."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from serving.errors import QueryError
from serving.timerange import (
    DAY_MS,
    HOUR_MS,
    MINUTE_MS,
    days_between,
    floor,
    from_ms,
    iso,
    parse_instant,
    to_ms,
)

NOW = to_ms(datetime(2024, 3, 5, 12, 34, 56, 789000, tzinfo=UTC))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("now", NOW),
        ("now-15m", NOW - 15 * MINUTE_MS),
        ("now-2h", NOW - 2 * HOUR_MS),
        ("now - 1d", NOW - DAY_MS),
        ("now-30s", NOW - 30_000),
        ("2024-03-05T10:00:00Z", to_ms(datetime(2024, 3, 5, 10, tzinfo=UTC))),
        ("2024-03-05T10:00:00", to_ms(datetime(2024, 3, 5, 10, tzinfo=UTC))),
        ("2024-03-05T12:00:00+02:00", to_ms(datetime(2024, 3, 5, 10, tzinfo=UTC))),
        ("2024-03-05", to_ms(datetime(2024, 3, 5, tzinfo=UTC))),
    ],
)
def test_instants_parse(text: str, expected: int) -> None:
    assert parse_instant(text, now_ms=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "now-1w", "now+1h", "", "2024-13-01", "1900-01-01"])
def test_bad_instants_say_what_to_send(text: str) -> None:
    with pytest.raises(QueryError, match="start=") as error:
        parse_instant(text, now_ms=NOW, name="start")
    assert error.value.status == 400


def test_buckets_are_utc_aligned() -> None:
    assert iso(floor(NOW, "minute")) == "2024-03-05T12:34:00Z"
    assert iso(floor(NOW, "hour")) == "2024-03-05T12:00:00Z"
    assert iso(floor(NOW, "day")) == "2024-03-05T00:00:00Z"
    assert iso(NOW) == "2024-03-05T12:34:56.789Z"
    with pytest.raises(QueryError, match="granularity"):
        floor(NOW, "week")


def test_naive_datetimes_are_utc_and_millis_exact() -> None:
    assert to_ms(datetime(1970, 1, 1, 0, 0, 0, 1000)) == 1
    assert to_ms(datetime(2024, 1, 1, 23, 59, 59, 999000)) % 1000 == 999


def test_days_between_clips_each_day() -> None:
    lo = to_ms(datetime(2024, 1, 1, 23, 50, tzinfo=UTC))
    hi = to_ms(datetime(2024, 1, 3, 0, 10, tzinfo=UTC))
    days = days_between(lo, hi)
    assert [d for d, _, _ in days] == [date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)]
    assert days[0][1] == lo and days[-1][2] == hi
    assert all(a < b for _, a, b in days)
    assert days[0][2] == days[1][1] == to_ms(datetime(2024, 1, 2, tzinfo=UTC))
    assert days_between(lo, lo) == []


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("now-9999999d", "start"),
        ("9999-12-31T23:59:59-05:00", "end"),
        ("9999-06-01T00:00:00Z", "end"),
        ("0001-01-01T00:00:00+01:00", "start"),
        ("1969-12-31T23:59:59.999Z", "start"),
    ],
)
def test_instants_beyond_the_accepted_range_name_the_parameter_and_the_range(
    text: str, name: str
) -> None:
    with pytest.raises(QueryError) as error:
        parse_instant(text, now_ms=NOW, name=name)
    assert error.value.status == 400 and error.value.code == "invalid_range"
    assert error.value.message == (
        f"{name}={text!r} lies outside the accepted range: from 1970-01-01T00:00:00Z "
        "up to (not including) 9999-01-01T00:00:00Z."
    )


def test_the_edges_of_the_accepted_range_parse() -> None:
    assert parse_instant("1970-01-01T00:00:00Z", now_ms=NOW) == 0
    last = parse_instant("9998-12-31T23:59:59.999Z", now_ms=NOW)
    assert iso(last) == "9998-12-31T23:59:59.999Z"


def test_iso_agrees_with_strftime_at_every_precision() -> None:
    import random

    rng = random.Random(5)
    for ms in [
        0,
        -1,
        -60_001,
        59_999,
        *(rng.randrange(-(10**13), 2 * 10**14) for _ in range(2000)),
    ]:
        moment = from_ms(ms)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms % 1000:03d}" if ms % 1000 else "")
        assert iso(ms) == text + "Z", ms
