"""How far each view's answers can be trusted: the speed side's event time and the batch
boundary's age, said plainly.

Every answer carries, per view, what the speed layer last reported
(``speed_progress``): the newest event time it reflected, its watermark,
its heartbeat and its Kafka lag, with ``lag_s`` = now - newest event time.
Event time is bounded (:mod:`core.event_time`): no event time or watermark
may lie more than the future tolerance ahead of now. One that does was
poisoned (a client's clock in year 9999 before the bounds existed), so the
view's freshness is an error naming the fix, ``lag_s`` is null (never a
negative lag), and ``/health`` answers 503.

Speed rows live for the speed TTL (``settings.speed.ttl_s``) from when they
were written, never before their window, so a window younger than
now - TTL still has its rows. When the batch layer stalls, its boundary
grows old: windows at or after the boundary but older than now - TTL may
have lost their speed rows and batch does not hold them yet. Those windows
are *unavailable* (null, never zero), every answer says which ones, and
``/health`` is ``degraded`` once a boundary is older than
``settings.serving.max_boundary_age_s``, well before that happens. A view
the batch layer never published is all speed: its windows older than
now - TTL are unavailable too.

>>> from serving.store import ViewPointers
>>> rules = FreshnessRules(future_tolerance_ms=60_000)
>>> speed_freshness(ViewPointers(None, newest_event=90_000), now=100_000, rules=rules)["lag_s"]
10.0
>>> poisoned = ViewPointers(None, newest_event=90_000, watermark=10**12)
>>> answer = speed_freshness(poisoned, now=100_000, rules=rules)
>>> answer["status"], answer["lag_s"], answer["error"][:40]
('error', None, 'watermark 2001-09-09T01:46:40Z is ahead ')
>>> unavailable_span(boundary=0, now=DAY_MS * 5, rules=FreshnessRules(speed_ttl_ms=DAY_MS * 3))
(0, 172800000)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from serving.timerange import DAY_MS, EARLIEST_MS, iso

if TYPE_CHECKING:
    from core.settings import Settings
    from serving.store import ViewPointers

__all__ = [
    "ERROR_CODES",
    "FreshnessRules",
    "boundary_age_s",
    "drift_message",
    "health",
    "health_status",
    "pipeline_views",
    "reconciliation",
    "speed_freshness",
    "unavailable",
    "unavailable_span",
]


@dataclass(frozen=True)
class FreshnessRules:
    """What serving knows of the other layers' bounds (built from the platform's settings)."""

    future_tolerance_ms: int = 60_000
    """An event time or watermark further than this ahead of now is an error."""
    speed_ttl_ms: int = 3 * DAY_MS
    """Lifetime of speed rows: a window older than now minus this may have lost them."""
    max_boundary_age_ms: int = DAY_MS
    """A batch boundary older than this makes ``/health`` degraded."""

    @classmethod
    def from_settings(cls, settings: Settings) -> FreshnessRules:
        from core.event_time import EventTimeBounds

        tolerance = EventTimeBounds.from_settings(settings).future_tolerance
        return cls(
            future_tolerance_ms=int(tolerance.total_seconds() * 1000),
            speed_ttl_ms=settings.speed.ttl_s * 1000,
            max_boundary_age_ms=int(settings.serving.max_boundary_age_s * 1000),
        )


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


def boundary_age_s(boundary: int | None, now: int) -> float | None:
    """Seconds since the batch boundary (None when the batch layer never published)."""
    return None if boundary is None else round(max(0, now - boundary) / 1000, 1)


def unavailable_span(
    boundary: int | None, now: int, rules: FreshnessRules
) -> tuple[int, int] | None:
    """Window starts ``[lo, hi)`` whose speed rows may have expired and batch does not hold."""
    lo = EARLIEST_MS if boundary is None else boundary
    hi = now - rules.speed_ttl_ms
    return (lo, hi) if hi > lo else None


def unavailable(
    boundary: int | None, now: int, rules: FreshnessRules, lo: int, hi: int
) -> dict[str, Any] | None:
    """What an answer over windows ``[lo, hi)`` says of its unavailable windows (None: none)."""
    span = unavailable_span(boundary, now, rules)
    if span is None or max(lo, span[0]) >= min(hi, span[1]):
        return None
    start, end = max(lo, span[0]), min(hi, span[1])
    where = (
        "the batch layer never published this view"
        if boundary is None
        else (f"the batch boundary is {iso(boundary)}, {boundary_age_s(boundary, now):.0f} s old")
    )
    return {
        "start": iso(start),
        "end": iso(end),
        "message": (
            f"Windows from {iso(start)} to {iso(end)} are unavailable, not zero: their speed "
            f"rows are older than the speed TTL ({rules.speed_ttl_ms // 1000} s) and may have "
            f"expired, and {where}. They come back once the batch layer publishes them."
        ),
    }


def health_status(
    freshness: Mapping[str, Mapping[str, Any]],
    boundary_ages: Mapping[str, float | None],
    rules: FreshnessRules,
) -> tuple[str, str | None]:
    """``("ok", None)``, or ``("error" | "degraded", <which views are wrong and why>)``.

    ``error``: a view's event time is ahead of now. ``degraded``: a view's batch
    boundary is older than ``rules.max_boundary_age_ms``.
    """
    errors = [f"{view}: {f['error']}" for view, f in freshness.items() if f["status"] == "error"]
    if errors:
        return "error", "; ".join(errors)
    limit_s = rules.max_boundary_age_ms / 1000
    stale = [
        f"{view}: the batch boundary is {age:.0f} s old (more than {limit_s:.0f} s); speed rows "
        f"expire after {rules.speed_ttl_ms // 1000} s, then windows after the boundary are "
        "unavailable until the batch layer publishes them"
        for view, age in boundary_ages.items()
        if age is not None and age > limit_s
    ]
    if stale:
        return "degraded", "; ".join(stale)
    return "ok", None


def reconciliation(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A view's last reconciliation as ``/health`` shows it (None: never reconciled)."""
    if row is None:
        return None
    return {
        "checked_at": _when(row["checked_at"]),
        "windows": [_when(row["window_from"]), _when(row["window_to"])],
        "windows_compared": row["windows_compared"],
        "windows_differing": row["windows_differing"],
        "rows_skipped_late": row["rows_skipped_late"],
        "largest_difference": row["largest_difference"],
        "largest_at": row["largest_at"],
        "speed_version": row["speed_version"],
        "passed": row["passed"],
        "report": row["report"],
    }


def drift_message(reconciled: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """Which views' last reconciliation found the layers apart beyond the threshold, and what
    to do (None: none did).

    >>> drift_message({"clicks": {"passed": False, "windows_differing": 3,
    ...                           "windows_compared": 60, "largest_at": "2026-...",
    ...                           "max_differing_windows": 0}, "site_activity": None})[:62]
    'clicks: 3 of 60 reconciled windows differ between the speed an'
    """
    drifting = [
        f"{view}: {row['windows_differing']} of {row['windows_compared']} reconciled windows "
        f"differ between the speed and batch views (at most {row['max_differing_windows']} "
        f"allowed; largest: {row['largest_at']})"
        for view, row in reconciled.items()
        if row is not None and row.get("passed") is False
    ]
    if not drifting:
        return None
    from pipelines import PIPELINES

    drifted = [
        spec.name
        for spec in PIPELINES
        if any(
            row is not None and row.get("passed") is False and view in spec.views
            for view, row in reconciled.items()
        )
    ] or ["P"]
    return (
        "; ".join(drifting)
        + "; replay the speed layer ("
        + ", ".join(
            f"python -m speed_layer replay --from earliest --pipeline {name}" for name in drifted
        )
        + "), then re-run the reconcile task (docs/operations.md)"
    )


ERROR_CODES = ("speed_event_time", "batch_boundary_old", "layers_disagree")
"""``/health``'s error codes, the most serious first (the whole answer's is the first any
pipeline has)."""


def health(
    freshness: Mapping[str, Mapping[str, Any]],
    boundary_ages: Mapping[str, float | None],
    reconciled: Mapping[str, Mapping[str, Any] | None],
    rules: FreshnessRules,
) -> dict[str, Any]:
    """``/health``'s verdict over every view, each pipeline its own failure domain.

    ``pipelines[name].status`` is ``error`` when one of its views' event time is ahead of
    now, ``degraded`` when a view's batch boundary is older than the rules allow or its last
    reconciliation found the layers apart (``message`` names the views and why), else
    ``ok``. The whole answer's ``status`` is ``error`` only when every pipeline is (nothing
    serves correctly: 503), ``degraded`` when any pipeline is not ``ok`` (the others serve:
    200 for the load balancer, the degraded ones named), else ``ok``.
    """
    pipelines = {}
    for name, views in pipeline_views(list(freshness)).items():
        status, message = health_status(
            {v: freshness[v] for v in views}, {v: boundary_ages.get(v) for v in views}, rules
        )
        code = {"error": "speed_event_time", "degraded": "batch_boundary_old"}.get(status)
        drift = drift_message({v: reconciled.get(v) for v in views})
        if drift is not None and status != "error":
            status, message = "degraded", "; ".join(filter(None, (message, drift)))
            code = code or "layers_disagree"
        pipelines[name] = {"status": status, "views": views}
        if message is not None:
            pipelines[name] |= {"error": code, "message": message}
    statuses = {p["status"] for p in pipelines.values()}
    status = "ok" if statuses <= {"ok"} else "error" if statuses == {"error"} else "degraded"
    answer: dict[str, Any] = {"status": status, "cassandra": "reachable"}
    failing = [p for p in pipelines.values() if p["status"] != "ok"]
    if failing:
        codes = [p["error"] for p in failing]
        answer |= {
            "error": next(c for c in (*ERROR_CODES, *codes) if c in codes),
            "message": "; ".join(p["message"] for p in failing),
        }
    return answer | {"pipelines": pipelines}


def pipeline_views(views: Sequence[str]) -> dict[str, list[str]]:
    """``views`` by the pipeline declaring each (a view no pipeline declares is its own).

    >>> pipeline_views(["clicks", "orders_by_currency", "page_activity"])
    {'web_events': ['clicks', 'page_activity'], 'checkouts': ['orders_by_currency']}
    """
    from pipelines import pipeline_of_view

    grouped: dict[str, list[str]] = {}
    for view in views:
        try:
            name = pipeline_of_view(view).name
        except KeyError:
            name = view
        grouped.setdefault(name, []).append(view)
    return grouped
