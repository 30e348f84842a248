"""Server-side enrichment of one Segment call, before validation.

Pure functions of the raw event and the request's facts (receive time,
source, batch-level fields), so they are easy to test and replay.

Null fields are treated as absent, as Segment does. Event time follows
Segment's definition: ``timestamp = receivedAt - (sentAt - originalTimestamp)``,
which cancels a client clock that runs fast or slow.
``originalTimestamp`` is the client's ``originalTimestamp``, else its
``timestamp`` (server libraries send ``timestamp``); without ``sentAt`` the
client time is used as is; without any client time, ``receivedAt``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any

__all__ = ["EnrichError", "RequestFacts", "enrich", "format_ts", "parse_ts"]


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

    @cached_property
    def received_at_text(self) -> str:
        return format_ts(self.received_at)

    @cached_property
    def batch_sent_at(self) -> datetime | None:
        """The batch-level sentAt, parsed once per request."""
        return parse_ts(self.sent_at, "sentAt")


def parse_ts(value: Any, field: str) -> datetime | None:
    """Parse an ISO-8601 timestamp (``Z`` or offset); naive times are taken as UTC."""
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise EnrichError(f"invalid:{field}", f"{field} must be an ISO-8601 string, got {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise EnrichError(
            f"invalid:{field}", f"{field} is not an ISO-8601 date-time: {value[:64]!r}"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def format_ts(moment: datetime) -> str:
    """ISO-8601 in UTC with milliseconds and ``Z``, the one format the platform writes."""
    if moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return moment.isoformat(timespec="milliseconds")[:-6] + "Z"


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


def enrich(event: dict[str, Any], facts: RequestFacts) -> dict[str, Any]:
    """Return a new event with event_id, receivedAt, corrected timestamp and provenance."""
    if facts.call_type is not None:
        declared = event.get("type")
        if declared is not None and declared != facts.call_type:
            raise EnrichError(
                "invalid:type", f"type {declared!r} sent to the /v1/{facts.call_type} endpoint"
            )
    original = parse_ts(event.get("originalTimestamp", event.get("timestamp")), "timestamp")
    sent_at = parse_ts(event["sentAt"], "sentAt") if "sentAt" in event else facts.batch_sent_at
    if original is not None and sent_at is not None:
        try:
            moment = facts.received_at - (sent_at - original)
        except OverflowError:  # a clock skew of millennia leaves the calendar
            raise EnrichError(
                "invalid:sentAt",
                f"sentAt {sent_at.isoformat()} and timestamp {original.isoformat()} are too far "
                "apart to correct the client's clock",
            ) from None
    else:
        moment = original or facts.received_at

    enriched = _without_nulls(event) if _has_nulls(event) else dict(event)
    message_id = event.get("messageId")
    if message_id is None or message_id == "":
        message_id = f"gen-{uuid.uuid4()}"
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
    return enriched
