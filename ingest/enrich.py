"""Server-side enrichment of one Segment call, before validation.

Pure functions of the raw event and the request's facts (receive time,
source, batch-level fields), so they are easy to test and replay.

Null fields are treated as absent, as Segment does. Event time follows
Segment's definition: ``timestamp = receivedAt - (sentAt - originalTimestamp)``,
which cancels a client clock that runs fast or slow.
``originalTimestamp`` is the client's ``originalTimestamp``, else its
``timestamp`` (server libraries send ``timestamp``); without ``sentAt`` the
client time is used as is; without any client time, ``receivedAt``.

The corrected time is then bounded (:mod:`core.event_time`): more than the
tolerance ahead of ``receivedAt`` it is clamped to ``receivedAt`` (the
client's value stays in ``originalTimestamp``); older than the live
endpoints' horizon (``/v1/import``: the import horizon) the event is
refused with ``invalid:timestamp_too_old``. The bound is computed on the
difference of the client's times, so no date, however extreme, overflows.

``event_id`` is the client's ``messageId``. An event sent without one gets an
id derived from what the client sent (:func:`derived_message_id`), so a retry
of it carries the same id and is deduplicated like any other.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from core.event_time import CLAMPED_FUTURE, EventTimeBounds

__all__ = [
    "EnrichError",
    "RequestFacts",
    "corrected_time",
    "derived_message_id",
    "enrich",
    "enrich_with_adjustment",
    "format_ts",
    "parse_ts",
]

_LEAP_SECOND = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d):60(?=[.,Zz+-]|$)")


class EnrichError(ValueError):
    """The event cannot be enriched; ``reason`` is stable, ``detail`` human."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class RequestFacts:
    """What the collector knows about the request an event came in."""

    received_at: datetime
    source_id: str
    contract_version: str
    call_type: str | None = None
    """The type implied by the endpoint (``/v1/page`` -> page); None for batches."""
    sent_at: Any = None
    """Batch-level ``sentAt``, used when an event has none."""
    ip: str | None = None
    historical: bool = False
    """``/v1/import``: old events are accepted back to the import horizon."""
    bounds: EventTimeBounds = field(default_factory=EventTimeBounds)
    """The accepted event-time range around ``received_at``."""

    @cached_property
    def received_at_text(self) -> str:
        return format_ts(self.received_at)

    @cached_property
    def source_header(self) -> tuple[str, bytes]:
        """The ``source_id`` header of the request's records."""
        return ("source_id", self.source_id.encode())

    @cached_property
    def batch_sent_at(self) -> datetime | None:
        """The batch-level sentAt, parsed once per request."""
        return parse_ts(self.sent_at, "sentAt")


def parse_ts(value: Any, field: str) -> datetime | None:
    """Parse an ISO-8601 timestamp (``Z`` or offset); naive times are taken as UTC.

    The offset is kept (converting 9999-12-31T23:59:59-05:00 to UTC would
    leave the calendar); a leap second (``23:59:60``) is read as ``23:59:59``,
    as ``java.time`` reads it.
    """
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise EnrichError(f"invalid:{field}", f"{field} must be an ISO-8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:  # a leap second is no valid time for Python: read it as :59
        try:
            parsed = datetime.fromisoformat(_LEAP_SECOND.sub(r"\1:59", value, count=1))
        except ValueError:
            raise EnrichError(
                f"invalid:{field}", f"{field} is not an ISO-8601 date-time: {value[:64]!r}"
            ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed


_SECONDS: dict[tuple[int, ...], str] = {}
"""``YYYY-MM-DDTHH:MM:SS`` of the seconds :func:`format_ts` formatted lately: an event's time
lies near its request's, and ``isoformat`` costs more than the rest of the text."""
_SECONDS_KEPT = 4096


def format_ts(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds (truncated) and ``Z``, the one format the platform
    writes.

    >>> format_ts(datetime(2026, 3, 1, 9, 5, 7, 999_999, tzinfo=UTC))
    '2026-03-01T09:05:07.999Z'
    >>> format_ts(datetime.fromisoformat("2026-03-01T04:05:07.5-05:00"))
    '2026-03-01T09:05:07.500Z'
    >>> format_ts(datetime(99, 1, 2, 3, 4, 5, tzinfo=UTC))
    '0099-01-02T03:04:05.000Z'
    """
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    second = (moment.year, moment.month, moment.day, moment.hour, moment.minute, moment.second)
    text = _SECONDS.get(second)
    if text is None:
        if len(_SECONDS) >= _SECONDS_KEPT:
            _SECONDS.clear()
        text = _SECONDS[second] = moment.isoformat(timespec="seconds")[:-6]
    return f"{text}.{moment.microsecond // 1000:03d}Z"


def _has_nulls(value: dict[str, Any]) -> bool:
    for key, item in value.items():
        if item is None:
            return True
        if type(item) is dict and key != "traits" and _has_nulls(item):
            return True
    return False


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    """Segment libraries send absent fields as null (``"userId": null``); null means absent.

    ``traits`` are kept as sent: there a null can mean "unset this trait".
    """
    return {
        key: _without_nulls(item) if isinstance(item, dict) and key != "traits" else item
        for key, item in value.items()
        if item is not None
    }


def corrected_time(
    original: datetime | None, sent_at: datetime | None, facts: RequestFacts
) -> tuple[datetime, str | None]:
    """(event time, adjustment) of a client time, skew-corrected and bounded.

    The adjustment is None, or :data:`~core.event_time.CLAMPED_FUTURE` when the
    time lay more than the tolerance ahead of ``receivedAt``. Raises
    :class:`EnrichError` ``invalid:timestamp_too_old`` past the horizon.
    """
    received = facts.received_at
    if original is None:
        return received, None
    # How far the event lies ahead of its receive time: exact, and never overflows.
    ahead = original - (sent_at if sent_at is not None else received)
    bounds = facts.bounds
    if ahead > bounds.future_tolerance:
        return received, CLAMPED_FUTURE
    max_age = bounds.max_age(facts.historical)
    try:
        if max_age is not None and -ahead > max_age:
            raise OverflowError
        return received + ahead, None
    except OverflowError:
        where = "/v1/import" if facts.historical else "the live endpoints"
        limit = f"{max_age.days} days" if max_age is not None else "year 1"
        hint = "" if facts.historical else "; send historical events to /v1/import"
        raise EnrichError(
            "invalid:timestamp_too_old",
            f"the event time is {_age(-ahead)} before receivedAt (timestamp "
            f"{original.isoformat()}, sentAt {sent_at.isoformat() if sent_at else None}); "
            f"{where} accept events up to {limit} old{hint}",
        ) from None


def _age(delta: timedelta) -> str:
    return f"{delta.days} days" if delta.days else f"{delta.total_seconds():.0f} s"


_NOT_IN_IDENTITY = frozenset({"messageId", "sentAt", "writeKey"})
"""Fields that differ between two sends of one event (``sentAt`` is set per attempt)."""


def derived_message_id(event: dict[str, Any], facts: RequestFacts, position: int = 0) -> str:
    """The id of an event sent without ``messageId``: the same for every retry of it.

    A hash of the source, the call type, and the event as the client sent it
    (its ``anonymousId``/``userId``, its own time and every other field but
    ``messageId``, ``sentAt`` and ``writeKey``). Two sources never share an
    id; two sends of one event always do. An event without any client time
    cannot be told from a repeat of it, so its id also takes ``receivedAt`` and
    its ``position`` in the request: such events are never merged, and their
    retries are not recognised either.
    """
    client_time = event.get("originalTimestamp")
    if client_time is None:
        client_time = event.get("timestamp")
    basis: dict[str, Any] = {
        "source_id": facts.source_id,
        "type": event.get("type") or facts.call_type,
        "anonymousId": event.get("anonymousId"),
        "userId": event.get("userId"),
        "time": client_time,
        "event": {k: v for k, v in event.items() if k not in _NOT_IN_IDENTITY},
    }
    if client_time is None:
        basis["receivedAt"] = facts.received_at_text
        basis["position"] = position
    # Canonical JSON: sorted keys, ASCII (lone surrogates and huge ints encode too).
    text = json.dumps(basis, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=repr)
    return f"gen-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def enrich(event: dict[str, Any], facts: RequestFacts, position: int = 0) -> dict[str, Any]:
    """Return a new event with event_id, receivedAt, corrected timestamp and provenance."""
    return enrich_with_adjustment(event, facts, position)[0]


def enrich_with_adjustment(
    event: dict[str, Any], facts: RequestFacts, position: int = 0, *, null_free: bool = False
) -> tuple[dict[str, Any], str | None]:
    """:func:`enrich`, and how the event time was adjusted (None: not at all).

    ``position``: the event's index in its request (see :func:`derived_message_id`).
    ``null_free``: the caller walked the event already and saw no null anywhere in it, so
    it is not looked for again.
    """
    if facts.call_type is not None:
        declared = event.get("type")
        if declared is not None and declared != facts.call_type:
            raise EnrichError(
                "invalid:type", f"type {declared!r} sent to the /v1/{facts.call_type} endpoint"
            )
    client_time = event.get("originalTimestamp")
    if client_time is None:  # absent or null: a null does not hide ``timestamp``
        client_time = event.get("timestamp")
    original = parse_ts(client_time, "timestamp")
    sent_at = parse_ts(event["sentAt"], "sentAt") if "sentAt" in event else facts.batch_sent_at
    if sent_at is None:
        sent_at = facts.batch_sent_at
    moment, adjustment = corrected_time(original, sent_at, facts)

    enriched = dict(event) if null_free or not _has_nulls(event) else _without_nulls(event)
    message_id = event.get("messageId")
    if message_id is None or message_id == "":
        message_id = derived_message_id(event, facts, position)
    enriched["messageId"] = message_id
    enriched["event_id"] = message_id
    if facts.call_type is not None:
        enriched["type"] = facts.call_type
    if original is not None and "originalTimestamp" not in enriched:
        enriched["originalTimestamp"] = enriched["timestamp"]  # as the client sent it
    if sent_at is not None and "sentAt" not in enriched:
        enriched["sentAt"] = facts.sent_at
    enriched["timestamp"] = format_ts(moment)
    enriched["receivedAt"] = facts.received_at_text
    enriched["source_id"] = facts.source_id
    enriched["contract_version"] = facts.contract_version
    if facts.ip is not None:
        context = event.get("context")
        if isinstance(context, dict) and "ip" not in context:
            enriched["context"] = {**context, "ip": facts.ip}
        elif context is None:
            enriched["context"] = {"ip": facts.ip}
    return enriched, adjustment
