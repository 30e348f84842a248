"""Ground truth of the ``order_attribution`` table, in plain Python.

From the sessions :func:`ingest.simulator.session_truth.build_session_truth` finds and
the checkout service's records, by the rules ``derived/order_attribution.py``
states: each order once (by ``(source_id, event_id)``), completed orders only; the
buyer's last session with a campaign that started at most 7 days before the order
(ties: the greater ``session_id``), else ``(none)``; per day, campaign and currency
the orders and revenue, the campaign's sessions that day and orders per session; a
campaign with sessions and no order that day has a row with no currency.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from pipelines.simulators.checkouts import Record

__all__ = ["build_attribution_truth"]

_LOOKBACK = timedelta(days=7)
_NONE = ("(none)", "(none)", "(none)")


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def build_attribution_truth(
    sessions: Iterable[dict[str, Any]],
    orders: Iterable[Record],
    forgotten: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One dict per (day, campaign, currency), with the table's columns, sorted."""
    sessions = [s for s in sessions if s["campaign_name"] is not None]
    touches: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for session in sessions:
        if session["user_id"] is not None:
            touches[session["user_id"]].append(session)
    seen: set[tuple[str, str]] = set()
    sold: defaultdict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0, 0])
    for record in orders:
        event = record.event
        if event is None or (event["source_id"], event["event_id"]) in seen:
            continue
        seen.add((event["source_id"], event["event_id"]))
        if event["type"] != "order_completed" or event["buyer_id"] in forgotten:
            continue
        at = _time(event["timestamp"])
        before = [s for s in touches[event["buyer_id"]] if at - _LOOKBACK <= s["started_at"] <= at]
        last = max(before, key=lambda s: (s["started_at"], s["session_id"]), default=None)
        campaign = _NONE if last is None else _campaign(last)
        cell = sold[(at.date(), *campaign, event["currency"])]
        cell[0] += 1
        cell[1] += event["amount_minor"]
    visits = Counter((s["session_date"], *_campaign(s)) for s in sessions)
    rows = []
    for key, (count, revenue) in sold.items():
        rows.append(_row(key, count, revenue, visits.get(key[:4])))
    for key, count in visits.items():
        if not any(k[:4] == key for k in sold):
            rows.append(_row((*key, None), 0, 0, count))
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def _campaign(session: dict[str, Any]) -> tuple[str, str, str]:
    return session["campaign_name"], session["campaign_source"], session["campaign_medium"]


def _row(key: tuple[Any, ...], orders: int, revenue: int, sessions: int | None) -> dict[str, Any]:
    day, name, source, medium, currency = key
    return {
        "attribution_date": day,
        "campaign_name": name,
        "campaign_source": source,
        "campaign_medium": medium,
        "currency": currency,
        "orders": orders,
        "revenue_minor": revenue,
        "sessions": sessions,
        "conversion_rate": None if not sessions else orders / sessions,
    }
