"""Event-time bounds: how far from the receive time an event's time may lie.

One rule, applied in three places so that no client can poison event time:

- **the collector** (``ingest.enrich``), after correcting the client's clock
  skew: a time more than ``future_tolerance`` ahead of ``receivedAt`` is
  clamped to ``receivedAt`` (the client's value stays in
  ``originalTimestamp``; the Kafka record carries the header
  ``timestamp_adjusted: clamped_future``), as Segment and Sentry's Relay do;
  a time older than ``live_max_age`` is dead-lettered with
  ``invalid:timestamp_too_old`` on the live endpoints and accepted back to
  ``import_max_age`` by ``/v1/import`` (historical import);
- **the speed layer**: a record whose event time lies more than
  ``future_tolerance`` ahead of the micro-batch's processing time is dropped
  before the watermark sees it (counted as ``future_rows_dropped``), so only
  real time can move the watermark;
- **the batch layer**: silver rejects a record whose event time lies more
  than ``future_tolerance`` ahead of its ``receivedAt`` (reason
  ``invalid:timestamp_future``) instead of creating a partition for it.

>>> from datetime import UTC, datetime, timedelta
>>> bounds = EventTimeBounds(future_tolerance=timedelta(seconds=60))
>>> now = datetime(2026, 1, 1, tzinfo=UTC)
>>> bounds.is_ahead(now + timedelta(seconds=61), now)
True
>>> bounds.is_ahead(datetime(9999, 12, 31, tzinfo=UTC), now)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = ["CLAMPED_FUTURE", "EventTimeBounds"]

CLAMPED_FUTURE = "clamped_future"
"""Value of the ``timestamp_adjusted`` record header of a clamped event."""


@dataclass(frozen=True, slots=True)
class EventTimeBounds:
    """The accepted event-time range around a receive time."""

    future_tolerance: timedelta = timedelta(seconds=60)
    """How far ahead of the receive (or processing) time an event time is trusted."""
    live_max_age: timedelta | None = timedelta(days=7)
    """The oldest event time the live endpoints accept; None: no limit."""
    import_max_age: timedelta = timedelta(days=3653)
    """The oldest event time historical import accepts."""

    @classmethod
    def from_settings(cls, settings: Settings) -> EventTimeBounds:
        """The bounds of ``settings.event_time``; the live age defaults to the topic's retention."""
        section = settings.event_time
        if section.max_age_s is not None:
            live = timedelta(seconds=section.max_age_s)
        elif settings.kafka.retention_ms > 0:
            live = timedelta(milliseconds=settings.kafka.retention_ms)
        else:  # retention -1: the log keeps everything, so does the live endpoint
            live = None
        return cls(
            future_tolerance=timedelta(seconds=section.future_tolerance_s),
            live_max_age=live,
            import_max_age=timedelta(days=section.import_max_age_days),
        )

    def is_ahead(self, moment: datetime, now: datetime) -> bool:
        """``moment`` lies more than the tolerance after ``now`` (computed without overflow)."""
        return moment - now > self.future_tolerance

    def max_age(self, historical: bool) -> timedelta | None:
        """How old an event may be: ``historical`` is ``/v1/import``."""
        return self.import_max_age if historical else self.live_max_age
