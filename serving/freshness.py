"""How far each view's answers can be trusted: the speed side's event time, said plainly.

Every answer carries, per view, what the speed layer last reported
(``speed_progress``): the newest event time it reflected, its watermark,
its heartbeat and its Kafka lag, with ``lag_s`` = now - newest event time.
Event time is bounded (:mod:`core.event_time`): no event time or watermark
may lie more than the future tolerance ahead of now. One that does was
poisoned (a client's clock in year 9999 before the bounds existed), so the
view's freshness is an error naming the fix, ``lag_s`` is null (never a
negative lag), and ``/health`` answers 503.

>>> from serving.store import ViewPointers
>>> rules = FreshnessRules(future_tolerance_ms=60_000)
>>> speed_freshness(ViewPointers(None, newest_event=90_000), now=100_000, rules=rules)["lag_s"]
10.0
>>> poisoned = ViewPointers(None, newest_event=90_000, watermark=10**12)
>>> answer = speed_freshness(poisoned, now=100_000, rules=rules)
>>> answer["status"], answer["lag_s"], answer["error"][:40]
('error', None, 'watermark 2001-09-09T01:46:40Z is ahead ')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from serving.timerange import iso

if TYPE_CHECKING:
    from core.settings import Settings
    from serving.store import ViewPointers

__all__ = ["FreshnessRules", "health_status", "speed_freshness"]


@dataclass(frozen=True)
class FreshnessRules:
    """What serving knows of the other layers' bounds (built from the platform's settings)."""

    future_tolerance_ms: int = 60_000
    """An event time or watermark further than this ahead of now is an error."""

    @classmethod
    def from_settings(cls, settings: Settings) -> FreshnessRules:
        from core.event_time import EventTimeBounds

        tolerance = EventTimeBounds.from_settings(settings).future_tolerance
        return cls(future_tolerance_ms=int(tolerance.total_seconds() * 1000))


def _when(ms: int | None) -> str | None:
    try:
        return iso(ms)
    except (OverflowError, ValueError):  # beyond what a date holds
        return f"{ms} ms after 1970-01-01T00:00:00Z"


def speed_freshness(p: ViewPointers, now: int, rules: FreshnessRules) -> dict[str, Any]:
    """One view's speed-side freshness: ``status`` ok, unknown (no progress yet) or error."""
    out: dict[str, Any] = {
        "status": "ok",
        "newest_event_time": _when(p.newest_event),
        "lag_s": None,
        "watermark": _when(p.watermark),
        "heartbeat_at": _when(p.heartbeat),
        "kafka_lag": p.kafka_lag,
    }
    latest = now + rules.future_tolerance_ms
    for label, ms in (("watermark", p.watermark), ("newest event time", p.newest_event)):
        if ms is not None and ms > latest:
            out["status"] = "error"
            out["error"] = (
                f"{label} {_when(ms)} is ahead of now; reset the speed layer (docs/operations.md)"
            )
            return out
    if p.newest_event is None:
        out["status"] = "unknown"
    else:  # up to the tolerance ahead of now is a clock difference, not a negative lag
        out["lag_s"] = round(max(0, now - p.newest_event) / 1000, 1)
    return out


def health_status(freshness: Mapping[str, Mapping[str, Any]]) -> tuple[str, str | None]:
    """``("ok", None)`` or ``("error", <which views are wrong and why>)``."""
    errors = [f"{view}: {f['error']}" for view, f in freshness.items() if f["status"] == "error"]
    if errors:
        return "error", "; ".join(errors)
    return "ok", None
