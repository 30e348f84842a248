"""Time in serving: parsing the caller's range, UTC buckets, epoch milliseconds.

Inside serving every instant is an ``int`` of epoch milliseconds (UTC), the
unit Cassandra stores timestamps in, so bucketing is integer arithmetic.
A range ``[start, end)`` holds the 1-minute windows whose *start* lies in it.

>>> parse_instant("2024-01-01T10:00:00Z", now_ms=0)
1704103200000
>>> parse_instant("now-1h", now_ms=7_200_000)
3600000
>>> floor(1704103265000, "minute") == 1704103260000
True
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Literal, get_args

from serving.errors import QueryError

__all__ = [
    "DAY_MS",
    "EARLIEST_MS",
    "GRANULARITIES",
    "HOUR_MS",
    "LATEST_MS",
    "MINUTE_MS",
    "Granularity",
    "InvalidRange",
    "day_of",
    "days_between",
    "floor",
    "from_ms",
    "is_relative",
    "iso",
    "parse_instant",
    "step_ms",
    "to_ms",
]

MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS

Granularity = Literal["minute", "hour", "day"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)
_STEPS = {"minute": MINUTE_MS, "hour": HOUR_MS, "day": DAY_MS}
_UNITS = {"s": 1000, "m": MINUTE_MS, "h": HOUR_MS, "d": DAY_MS}
_RELATIVE = re.compile(r"^now(?:\s*-\s*(\d{1,7})\s*([smhd]))?$")
_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
EARLIEST_MS = 0
"""The earliest instant a range may name: 1970-01-01T00:00:00Z."""
LATEST_MS = (datetime(9999, 1, 1, tzinfo=UTC) - _EPOCH) // _ONE_MS
"""The latest instant a range may name: 9999-01-01T00:00:00Z (a range and its buckets
after it stay within what dates can hold)."""
_ISO_MINUTES: dict[int, str] = {}
"""Window starts already formatted (answers repeat the same minutes)."""


class InvalidRange(QueryError):
    """A time or range the caller gave cannot be answered; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__("invalid_range", message)


def step_ms(granularity: str) -> int:
    """Width of one bucket of ``granularity`` in milliseconds."""
    try:
        return _STEPS[granularity]
    except KeyError:
        raise InvalidRange(
            f"granularity must be one of {', '.join(GRANULARITIES)}; got {granularity!r}."
        ) from None


def floor(ms: int, granularity: str) -> int:
    """Start of the UTC bucket of ``granularity`` holding ``ms``."""
    step = step_ms(granularity)
    return ms - ms % step


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of a datetime (naive means UTC, as the Cassandra driver returns)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _ONE_MS


def from_ms(ms: int) -> datetime:
    """The timezone-aware UTC datetime of epoch milliseconds."""
    return _EPOCH + timedelta(milliseconds=ms)


def iso(ms: int | None) -> str | None:
    """``2024-01-01T10:00:00Z`` (milliseconds shown only when not zero)."""
    if ms is None:
        return None
    minute = ms - ms % MINUTE_MS
    text = _ISO_MINUTES.get(minute)
    if text is None:
        if len(_ISO_MINUTES) > 200_000:
            _ISO_MINUTES.clear()
        text = _ISO_MINUTES[minute] = from_ms(minute).strftime("%Y-%m-%dT%H:%M:%SZ")
    if minute == ms:
        return text
    second, milli = divmod(ms - minute, 1000)  # the minute's text ends in "00Z"
    if milli:
        return f"{text[:-3]}{second:02d}.{milli:03d}Z"
    return f"{text[:-3]}{second:02d}Z"


def day_of(ms: int) -> date:
    """The UTC date of an instant: the ``day`` of the partition holding its window."""
    return _EPOCH_DAY + timedelta(days=ms // DAY_MS)


def days_between(lo: int, hi: int) -> list[tuple[date, int, int]]:
    """``(day, lo, hi)`` per UTC day overlapping ``[lo, hi)``, clipped to the range."""
    out = []
    start = lo
    while start < hi:
        end = min(hi, start - start % DAY_MS + DAY_MS)
        out.append((day_of(start), start, end))
        start = end
    return out


def is_relative(text: str) -> bool:
    """Whether ``text`` names an instant relative to now (it moves with the clock).

    >>> is_relative("now-15m"), is_relative(" now "), is_relative("2024-01-01T10:00:00Z")
    (True, True, False)
    """
    return _RELATIVE.match(text.strip()) is not None


def parse_instant(text: str, *, now_ms: int, name: str = "time") -> int:
    """An instant: ISO 8601 (``2024-01-01T10:00:00Z``, no zone = UTC) or ``now[-N{s,m,h,d}]``."""
    value = text.strip()
    match = _RELATIVE.match(value)
    if match:
        amount, unit = match.groups()
        ms = now_ms - (int(amount) * _UNITS[unit] if amount else 0)
    else:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        except (ValueError, OverflowError):
            raise InvalidRange(
                f"{name}={text!r} is not a time: use ISO 8601 such as 2024-01-01T10:00:00Z, "
                "or now, now-15m, now-2h, now-1d."
            ) from None
        ms = to_ms(moment)
    if not EARLIEST_MS <= ms < LATEST_MS:
        raise InvalidRange(
            f"{name}={text!r} lies outside the accepted range: from {iso(EARLIEST_MS)} "
            f"up to (not including) {iso(LATEST_MS)}."
        )
    return ms
