"""Ground truth of the ``web_sessions`` table: the sessions a correct build finds.

Computed from the messages as sent, in plain Python, by the rules
``derived/web_sessions.py`` states: each message once (by messageId) and valid
ones only, as :func:`ingest.simulator.truth.build_truth` counts them; the
visitor is the ``anonymousId`` (else the ``userId``); a gap of more than 30
minutes between a visitor's events, or midnight UTC, starts a new session;
events of one instant are ordered by source, then event id. Event times are the
true times (``SimEvent.time``), which the collector's corrected ``timestamp``
equals.

>>> from ingest.simulator import SimulatorConfig, generate
>>> events = generate(SimulatorConfig(seed=3, events=200, rate=0.05))
>>> sessions = build_session_truth(events)
>>> sum(s["events"] for s in sessions) == sum(1 for e in events if not e.duplicate)
True
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from ingest.simulator.events import SimEvent

__all__ = ["build_session_truth"]

_GAP = timedelta(minutes=30)
_MOBILE = ("Mobile", "Android", "iPhone", "iPad")


def build_session_truth(
    events: Iterable[SimEvent],
    source_id: str = "simulator",
    forgotten: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One dict per session, with the table's columns, sorted by ``session_id``.

    ``source_id`` is the source the collector stamped (``produce_direct``'s); events of
    a visitor or user in ``forgotten`` are left out."""
    seen: set[object] = set()
    by_visitor: defaultdict[str, list[tuple[datetime, str, dict[str, Any]]]] = defaultdict(list)
    for event in events:
        key = event.message_id or ("seq", event.seq)
        if key in seen:
            continue
        seen.add(key)
        if event.defect is not None:
            continue
        payload = event.payload
        visitor = payload.get("anonymousId") or payload.get("userId")
        if visitor in forgotten or payload.get("userId") in forgotten:
            continue
        by_visitor[visitor].append((event.time, payload["messageId"], payload))
    sessions = []
    for visitor, happened in by_visitor.items():
        happened.sort(key=lambda e: (e[0], source_id, e[1]))
        current: list[tuple[datetime, str, dict[str, Any]]] = []
        for item in happened:
            if current and (
                item[0] - current[-1][0] > _GAP or item[0].date() != current[-1][0].date()
            ):
                sessions.append(_session(visitor, current, source_id))
                current = []
            current.append(item)
        sessions.append(_session(visitor, current, source_id))
    return sorted(sessions, key=lambda s: s["session_id"])


def _session(
    visitor: str, events: list[tuple[datetime, str, dict[str, Any]]], source_id: str
) -> dict[str, Any]:
    first_time, first_id, first = events[0]
    pages = [p for _, _, p in events if p["type"] == "page"]
    users = [p["userId"] for _, _, p in events if p.get("userId")]
    context = first.get("context") or {}
    campaign = context.get("campaign") or {}
    referrer = (first.get("properties") or {}).get("referrer")
    if referrer is None:
        referrer = (context.get("page") or {}).get("referrer")
    agent = context.get("userAgent")
    landing = None
    if pages:
        landing = (pages[0].get("properties") or {}).get("path")
        landing = landing or (pages[0].get("context") or {}).get("page", {}).get("path")
    return {
        "session_id": f"{source_id}/{first_id}",
        "session_date": first_time.date(),
        "visitor_id": visitor,
        "user_id": users[-1] if users else None,
        "started_at": first_time,
        "ended_at": events[-1][0],
        "duration_ms": (events[-1][0] - first_time) // timedelta(milliseconds=1),
        "events": len(events),
        "pages": len(pages),
        "landing_page": landing,
        "referrer": referrer or None,
        "campaign_name": campaign.get("name"),
        "campaign_source": campaign.get("source"),
        "campaign_medium": campaign.get("medium"),
        "device": None
        if agent is None
        else ("mobile" if any(w in agent for w in _MOBILE) else "desktop"),
        "converted": any(
            p["type"] == "track" and p.get("event") == "Order Completed" for _, _, p in events
        ),
    }
