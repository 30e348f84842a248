"""Time helpers: the wire format, minute keys and Segment's skew correction.

The simulator counts time in whole milliseconds since the Unix epoch, so every
timestamp it writes round-trips exactly through the ISO-8601 wire format.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = [
    "corrected_time",
    "format_ts",
    "from_ms",
    "minute_key",
    "parse_ts",
    "to_ms",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)


def to_ms(moment: datetime) -> int:
    """Milliseconds since the epoch (sub-millisecond parts are dropped)."""
    if moment.tzinfo is None:
        raise ValueError(f"expected a timezone-aware datetime, got {moment!r}")
    return (moment - _EPOCH) // _MS


def from_ms(ms: int) -> datetime:
    """The UTC datetime ``ms`` milliseconds after the epoch."""
    return _EPOCH + timedelta(milliseconds=ms)


def format_ts(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds and ``Z``: ``2024-01-01T00:00:01.250Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_ts(text: str) -> datetime:
    """Parse an ISO-8601 timestamp (``Z`` or an offset) into an aware UTC datetime."""
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp {text!r} has no timezone; send UTC with a trailing Z")
    return parsed.astimezone(UTC)


def minute_key(moment: datetime) -> str:
    """The event-time minute ``moment`` falls in, as ``2024-01-01T00:05:00Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z")


def corrected_time(received_at: datetime, sent_at: datetime, original: datetime) -> datetime:
    """Segment's skew correction: ``receivedAt - (sentAt - originalTimestamp)``.

    ``sentAt`` and ``originalTimestamp`` come from the same (possibly wrong)
    client clock, so their difference is the true age of the event when it was
    sent, and the server's receive time minus that age is the true event time
    (up to the network latency).

    >>> t = parse_ts("2024-01-01T00:00:10.000Z")
    >>> skew = timedelta(hours=1)
    >>> corrected_time(t + timedelta(seconds=5), t + skew + timedelta(seconds=5), t + skew) == t
    True
    """
    return received_at - (sent_at - original)
