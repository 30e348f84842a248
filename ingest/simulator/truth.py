"""Ground truth: what a correct pipeline must report for a list of sent messages.

Rules, applied in this order:

1. **Deduplicate** by messageId (the first delivery counts; a payload that is
   not an object has no messageId and is keyed by its sequence number).
2. **Exclude invalid events** (``SimEvent.defect`` set); count them by defect.
3. **Event time** is ``SimEvent.time``, the true time on the simulated clock.
   It equals the collector's skew-corrected ``timestamp`` (receivedAt -
   (sentAt - originalTimestamp)) up to network latency, never the skewed
   ``originalTimestamp``. Minutes are UTC, keyed ``2024-01-01T00:05:00Z``.
4. **Identity** of a visitor is ``userId`` when present and non-empty, else
   ``anonymousId`` (the collector's Kafka key). No identity stitching: a
   visitor who identifies counts once under each id in the minute they log in.
   Visitors are counted over valid events of every type.
5. **Search queries** are normalised: lower-cased, trimmed, inner whitespace
   collapsed to one space (:func:`normalise_query`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields
from typing import Any

from ingest.simulator.clock import minute_key
from ingest.simulator.events import SimEvent

__all__ = ["GroundTruth", "LoadTime", "build_truth", "identity_of", "normalise_query"]


@dataclass(frozen=True)
class LoadTime:
    """Load times of one page over the run."""

    count: int
    sum_ms: float
    max_ms: float


@dataclass(frozen=True)
class GroundTruth:
    """The expected answers; per-minute maps are keyed by UTC minute, then by key."""

    deliveries: int
    """Messages sent, duplicates included."""
    distinct_messages: int
    """Messages after deduplication by messageId."""
    duplicates: int
    """Deliveries that repeat an earlier message."""
    valid_events: int
    """Distinct valid events: what the events topic holds after deduplication."""
    invalid_by_reason: dict[str, int]
    """Distinct invalid events per defect label (see ``DEFECTS``)."""
    events_per_minute: dict[str, int]
    """Valid events per minute, all types."""
    page_views_per_minute: dict[str, int]
    """Page views per minute, all pages."""
    visitors_per_minute: dict[str, int]
    """Distinct visitors per minute, over valid events of every type."""
    visitors_total: int
    """Distinct visitors over the whole run."""
    page_views: dict[str, dict[str, int]]
    """Minute -> page path -> page views."""
    page_visitors: dict[str, dict[str, int]]
    """Minute -> page path -> distinct visitors who viewed it."""
    clicks: dict[str, dict[str, int]]
    """Minute -> click target -> "Element Clicked" events."""
    searches: dict[str, dict[str, int]]
    """Minute -> normalised query -> "Site Searched" events."""
    load_time: dict[str, LoadTime]
    """Page path -> load time statistics over the whole run."""

    def to_json(self, indent: int | None = 2) -> str:
        """Serialise to JSON (keys sorted, so equal truths give equal text)."""
        return json.dumps(asdict(self), indent=indent, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> GroundTruth:
        """Read what :meth:`to_json` wrote."""
        data = json.loads(text)
        expected = {f.name for f in fields(cls)}
        if not isinstance(data, dict) or set(data) != expected:
            got = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise ValueError(
                f"not a ground truth document: expected keys {sorted(expected)}, got {got}"
            )
        data["load_time"] = {path: LoadTime(**stats) for path, stats in data["load_time"].items()}
        return cls(**data)


def identity_of(payload: dict[str, Any]) -> str | None:
    """``userId`` when present and non-empty, else ``anonymousId`` (None if neither)."""
    user = payload.get("userId")
    if isinstance(user, str) and user:
        return user
    anonymous = payload.get("anonymousId")
    return anonymous if isinstance(anonymous, str) and anonymous else None


def normalise_query(query: str) -> str:
    """Lower-case, trim and collapse whitespace: ``"  Kafka   API "`` -> ``"kafka api"``."""
    return " ".join(query.split()).lower()


def build_truth(events: Iterable[SimEvent]) -> GroundTruth:
    """Compute the ground truth of the messages, in the order they were sent."""
    seen: set[object] = set()
    deliveries = 0
    invalid: Counter[str] = Counter()
    events_pm: Counter[str] = Counter()
    views_pm: Counter[str] = Counter()
    visitors_pm: defaultdict[str, set[str]] = defaultdict(set)
    visitors: set[str] = set()
    views: defaultdict[str, Counter[str]] = defaultdict(Counter)
    page_visitors: defaultdict[str, defaultdict[str, set[str]]] = defaultdict(
        lambda: defaultdict(set)
    )
    clicks: defaultdict[str, Counter[str]] = defaultdict(Counter)
    searches: defaultdict[str, Counter[str]] = defaultdict(Counter)
    loads: defaultdict[str, list[float]] = defaultdict(list)
    for event in events:
        deliveries += 1
        key = event.message_id or ("seq", event.seq)
        if key in seen:
            continue
        seen.add(key)
        if event.defect is not None:
            invalid[event.defect] += 1
            continue
        payload, minute = event.payload, minute_key(event.time)
        who = identity_of(payload)
        events_pm[minute] += 1
        if who is not None:
            visitors_pm[minute].add(who)
            visitors.add(who)
        properties = payload.get("properties") or {}
        if payload["type"] == "page":
            path = properties["path"]
            views_pm[minute] += 1
            views[minute][path] += 1
            if who is not None:
                page_visitors[minute][path].add(who)
            if "load_time_ms" in properties:
                loads[path].append(properties["load_time_ms"])
        elif payload["type"] == "track" and payload.get("event") == "Element Clicked":
            clicks[minute][properties["target"]] += 1
        elif payload["type"] == "track" and payload.get("event") == "Site Searched":
            searches[minute][normalise_query(properties["query"])] += 1
    distinct = len(seen)
    return GroundTruth(
        deliveries=deliveries,
        distinct_messages=distinct,
        duplicates=deliveries - distinct,
        valid_events=distinct - sum(invalid.values()),
        invalid_by_reason=dict(sorted(invalid.items())),
        events_per_minute=_sorted(events_pm),
        page_views_per_minute=_sorted(views_pm),
        visitors_per_minute={m: len(ids) for m, ids in sorted(visitors_pm.items())},
        visitors_total=len(visitors),
        page_views={m: _sorted(c) for m, c in sorted(views.items())},
        page_visitors={
            m: {path: len(ids) for path, ids in sorted(by_page.items())}
            for m, by_page in sorted(page_visitors.items())
        },
        clicks={m: _sorted(c) for m, c in sorted(clicks.items())},
        searches={m: _sorted(c) for m, c in sorted(searches.items())},
        load_time={
            path: LoadTime(len(values), sum(values), max(values))
            for path, values in sorted(loads.items())
        },
    )


def _sorted(counter: Counter[str]) -> dict[str, int]:
    return dict(sorted(counter.items()))
