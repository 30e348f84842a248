"""One simulated message: the wire payload plus what only the simulator knows.

Time model (all simulated clients share it):

- ``time`` is the true event time, on the simulated clock.
- A client's clock reads true time + ``skew``; most clients have no skew.
- ``originalTimestamp`` = ``time`` + skew (the client's clock when it happened).
- ``sentAt`` = (moment the request leaves) + skew (the client's clock then).
- The collector sets ``timestamp = receivedAt - (sentAt - originalTimestamp)``,
  which equals ``time`` plus the network latency: the skew cancels out.

So ``time`` is exactly the skew-corrected event time a correct pipeline
windows on, and it is what the ground truth keys minutes by.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from ingest.simulator.clock import format_ts, parse_ts

__all__ = ["DEFECTS", "SimEvent", "shift_events", "stamp_sent_at"]

DEFECTS = (
    "missing_identity",
    "negative_load_time",
    "track_without_event",
    "bad_type",
    "wrong_property_type",
    "not_an_object",
)
"""Labels of the ways the simulator breaks events on purpose.

- ``missing_identity``: neither userId nor anonymousId.
- ``negative_load_time``: a page view with ``properties.load_time_ms < 0``.
- ``track_without_event``: a track call without ``event``.
- ``bad_type``: a ``type`` outside the contract's enum (e.g. ``pageview``).
- ``wrong_property_type``: ``results_count`` or ``load_time_ms`` sent as a string.
- ``not_an_object``: the event is a JSON string (double-encoded), not an object.
"""


@dataclass(frozen=True, slots=True)
class SimEvent:
    """One message as the simulator sends it, with its true time and labels."""

    seq: int
    """Position of the event in the order it happened (duplicates share it)."""
    payload: Any
    """The Segment wire event: a dict, or a string for the ``not_an_object`` defect."""
    time: datetime
    """True event time (simulated clock): what the skew-corrected ``timestamp`` must be."""
    sent_at: datetime
    """True (unskewed) moment the request carrying this message leaves the client."""
    skew: timedelta
    """How far the client's clock is off; ``originalTimestamp`` = ``time`` + ``skew``."""
    defect: str | None = None
    """Why the event is invalid (one of :data:`DEFECTS`), None when it is valid."""
    duplicate: bool = False
    """A re-send of an earlier message with the same messageId."""

    @property
    def message_id(self) -> str | None:
        """The payload's messageId, when the payload is an object that has one."""
        if isinstance(self.payload, dict):
            value = self.payload.get("messageId")
            return value if isinstance(value, str) else None
        return None


def stamp_sent_at(event: SimEvent, sent_at: datetime) -> SimEvent:
    """The event as sent at true moment ``sent_at``: ``sentAt`` = ``sent_at`` + client skew.

    ``originalTimestamp`` stays, so the collector's correction still yields
    ``event.time``. A payload that is not an object is left as it is.
    """
    payload = event.payload
    if isinstance(payload, dict):
        payload = {**payload, "sentAt": format_ts(sent_at + event.skew)}
    return replace(event, payload=payload, sent_at=sent_at)


def shift_events(events: Iterable[SimEvent], by: timedelta) -> list[SimEvent]:
    """Move every event's clock by ``by``: true time, send time and both wire timestamps.

    Used by live mode to anchor a simulated run at the real current time.
    Differences between timestamps (ages, skews) do not change.
    """
    shifted = []
    for event in events:
        payload = event.payload
        if isinstance(payload, dict):
            payload = dict(payload)
            for field in ("originalTimestamp", "sentAt"):
                if isinstance(payload.get(field), str):
                    payload[field] = format_ts(parse_ts(payload[field]) + by)
        shifted.append(
            replace(event, payload=payload, time=event.time + by, sent_at=event.sent_at + by)
        )
    return shifted
