"""The merged answers the demo shows, as text: the serving layer's story in one screen.

:func:`demo_answers` asks the query core (in this process, against the
platform's Cassandra) the questions a dashboard asks, over a range that
normally straddles the batch boundary, and renders them: events per minute
with each minute marked final (batch) or provisional (speed), top pages,
slowest pages, top search terms, reach, the boundary per view and the speed
side's freshness. :func:`merged_counts` gives the per-minute numbers for a
comparison with the simulator's ground truth.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from core.settings import Settings
from serving.timerange import MINUTE_MS, floor, iso, to_ms

__all__ = ["demo_answers", "merged_counts"]


async def _with_queries(settings: Settings, ask) -> Any:
    from core.cassandra import connect
    from serving.freshness import FreshnessRules
    from serving.query import CacheRules, Limits, Queries
    from serving.store import ServingStore

    cluster, session = connect(settings.cassandra)
    try:
        store = ServingStore(session, settings.cassandra.keyspace, pointer_cache_s=0)
        return await ask(
            Queries(
                store,
                Limits.from_settings(settings.serving),
                rules=FreshnessRules.from_settings(settings),
                cache=CacheRules(entries=0),
            )
        )
    finally:
        cluster.shutdown()


def _range(queries, start: datetime | None, end: datetime | None, minutes: int) -> tuple[int, int]:
    hi = to_ms(end) if end else queries.now_ms()
    lo = to_ms(start) if start else floor(hi, "minute") - minutes * MINUTE_MS
    return lo, hi


def merged_counts(
    settings: Settings,
    start: datetime,
    end: datetime,
    view: str = "site_activity",
    measure: str = "events",
    key: Sequence[str] = ("all",),
) -> dict[str, int]:
    """Minute (``2024-01-01T00:05:00Z``) -> merged ``measure`` of ``key``, non-zero minutes only."""

    async def ask(queries):
        answer = await queries.timeseries(
            view, [tuple(key)], to_ms(start), to_ms(end), "minute", measures=[measure]
        )
        return {b["start"]: b[measure] for b in answer["series"][0]["buckets"] if b[measure]}

    return asyncio.run(_with_queries(settings, ask))


def _hhmm(text: str | None) -> str:
    return "-" if text is None else text[11:16] + "Z"


def _lag(fresh: dict[str, Any]) -> str:
    """A view's speed freshness from serving's health, in words.

    >>> _lag({"lag_s": 3.9, "kafka_lag": 0})
    'lag 3.9s, kafka lag 0'
    >>> _lag({"lag_s": None, "kafka_lag": 0})
    'no speed row yet, kafka lag 0'
    >>> _lag({"error": "Cassandra unavailable", "lag_s": None})
    'Cassandra unavailable'
    """
    if fresh.get("error"):
        return fresh["error"]
    lag = "no speed row yet" if fresh.get("lag_s") is None else f"lag {fresh['lag_s']}s"
    return f"{lag}, kafka lag {fresh.get('kafka_lag')}"


async def _answers(queries, start, end, minutes: int, n: int) -> str:
    lo, hi = _range(queries, start, end, minutes)
    site, pages, slowest, terms, reach = await asyncio.gather(
        queries.timeseries("site_activity", [("all",)], lo, hi, "minute"),
        queries.top("page_activity", "page_views", lo, hi, n),
        queries.top("page_activity", "load_sketch", lo, hi, n, 0.95, min_samples=3),
        queries.top("search_terms", "searches", lo, hi, n),
        queries.reach("site_activity", ("all",), lo, hi),
    )
    health = await queries.health()
    lines = [f"serving answers for {iso(lo)} .. {iso(hi)}"]
    for view, boundary in health["boundary"].items():
        fresh = health["freshness"][view]
        lines.append(
            f"  {view:<14} boundary {boundary or 'none (batch never ran: all speed)'}; "
            f"speed newest event {fresh['newest_event_time'] or '-'} ({_lag(fresh)})"
        )
    buckets = [b for b in site["series"][0]["buckets"] if b["events"]]
    final = sum(b["events"] for b in buckets if b["final"])
    provisional = sum(b["events"] for b in buckets if not b["final"])
    lines.append("events per minute (F = final, from batch; P = provisional, from speed):")
    row = []
    for b in buckets:
        row.append(f"{_hhmm(b['start'])} {'F' if b['final'] else 'P'} {b['events']:>5}")
        if len(row) == 4:
            lines.append("  " + "   ".join(row))
            row = []
    if row:
        lines.append("  " + "   ".join(row))
    lines.append(
        f"  total {final + provisional} events = {final} final + {provisional} provisional; "
        f"{sum(b['page_views'] for b in buckets)} page views"
    )
    lines.append(
        f"unique visitors (site, whole range): {reach['visitors']} "
        f"[{reach['lower_bound']}, {reach['upper_bound']}] ({reach['source']})"
    )
    lost = next((a["unavailable"] for a in (site, reach) if a["unavailable"]), None)
    if lost is not None:
        lines.append(f"unavailable: {lost['message']}")
    for title, answer, fmt in (
        ("top pages (views)", pages, "{:.0f}"),
        ("slowest pages (p95 load, ms)", slowest, "{:.0f}"),
        ("top search terms", terms, "{:.0f}"),
    ):
        items = [
            f"{next(iter(i['key'].values()))} {fmt.format(i['value'])}" for i in answer["items"]
        ]
        state = "final" if answer["final"] else "provisional"
        lines.append(f"{title} [{state}]: " + (", ".join(items) or "none"))
    return "\n".join(lines)


def demo_answers(
    settings: Settings,
    start: datetime | None = None,
    end: datetime | None = None,
    *,
    minutes: int = 30,
    n: int = 5,
) -> str:
    """The merged answers over ``[start, end)`` (default: the last ``minutes`` minutes), as text.

    Call it before and after a batch run: the boundary line moves, minutes
    turn from P to F, and the totals stay the same.
    """
    return asyncio.run(
        _with_queries(settings, lambda queries: _answers(queries, start, end, minutes, n))
    )
