"""Reconcile: after each publish, compare the published batch rows with the speed rows still held.

Both layers compute every view with the same function (:mod:`views`), so on
a *closed* window whose events reached both, a view's batch row and speed
row must match (the rules per measure kind: :mod:`batch_layer.drift`). This
step checks it, per view, on every minute window of :func:`windows_to_compare`:

- from where the last passed reconciliation stopped (the first one: the
  start of the oldest day a publish wrote since), but never before the
  speed rows still held (``now - speed TTL + reconcile_ttl_margin_s``) nor
  before the live speed run's floor (the windows it did not write);
- up to the batch boundary, but only over windows both layers have closed:
  before the speed layer's watermark (it still updates later windows), and
  before ``batch cut - watermark delay - margin`` (an event the speed layer
  may still accept for a window can arrive until about the watermark delay
  after it; the batch cut, ``as_of``, is when bronze fixed the end of the log);
- without the days a ``forget`` republished within the speed TTL: the
  speed rows still count the forgotten user's events until they expire.

Batch rows are the by-minute partitions of each day's published version
(``batch_days``), speed rows the by-minute partitions of the version
``speed_versions`` points at, read with prepared statements, many in flight.

The speed layer drops events later than its watermark, which the batch layer
counts: those are not drift. The step reads the silver events of the
compared days that were possibly late for the speed layer (received more
than ``watermark - future tolerance - reconcile_margin_s`` after their event
time), runs each view's own build function over them, and skips the
``(window, key)`` rows they touch (``rows_skipped_late``).

Per view, the result goes to ``reconcile_results`` (serving's ``/health`` and
``/metrics``, ``platformctl status``), the ledger and a report
(``reports_dir/<pipeline>/<run id>/reconcile.{md,json}``); each view logs
``reconcile.checked``. When a view has more differing windows than
``batch.reconcile_max_differing_windows``, it logs ``reconcile.drift`` (error)
and the step raises :class:`LayersDisagree` (exit code 4) with the report.
A failed run consumes nothing: the next run compares the same windows again
(after a replay repaired the speed layer, it passes).
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from batch_layer.drift import ViewDrift, report_markdown
from batch_layer.ledger import Entry, Ledger, pending
from batch_layer.silver import silver_path
from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import Settings
from layout import (
    Boundary,
    PointerTables,
    ViewTables,
    read_boundaries,
    read_live_floor,
    read_speed_versions,
)
from pipelines import PipelineSpec
from views import ViewSpec
from views.common import interval_seconds

if TYPE_CHECKING:
    from cassandra.cluster import Session
    from pyspark.sql import SparkSession

__all__ = [
    "LayersDisagree",
    "ReconcileRun",
    "late_rows",
    "reconcile",
    "reconcile_view",
    "windows_to_compare",
]

_log = get_logger(__name__)

MINUTE_MS = 60_000
DAY_MS = 86_400_000
_CHUNK = 240
"""Windows read per round trip batch (both layers): four hours of minutes."""

Ranges = list[tuple[int, int]]
LateRows = dict[int, set[tuple[Any, ...]]]
"""Per window (epoch ms), the keys to skip."""


class LayersDisagree(RuntimeError):
    """A view drifted beyond the threshold; the message is the report."""


@dataclass(frozen=True)
class ReconcileRun:
    passed: bool
    views: dict[str, dict[str, Any]]
    """Per view: what was compared and found (:meth:`ViewDrift.as_dict` without its lists of
    windows and rows) and ``resume_at``, where the next run starts (epoch ms)."""
    report_path: str | None


def _floor(ms: int, step: int = MINUTE_MS) -> int:
    return ms - ms % step


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _day_ms(day: date) -> int:
    return _ms(datetime(day.year, day.month, day.day, tzinfo=UTC))


def windows_to_compare(
    *,
    previous_end: int | None,
    days_published: Iterable[date],
    boundary: int | None,
    closed_until: int | None,
    held_from: int,
    skip_days: Iterable[date] = (),
) -> Ranges:
    """The ``[lo, hi)`` ranges of minute windows (epoch ms) to compare, in order.

    From ``previous_end`` (None: the start of the first day published) to the
    ``boundary`` or ``closed_until`` (whichever is first, floored to a minute),
    never before ``held_from`` (rounded up to a minute), without ``skip_days``.

    >>> h = 3_600_000
    >>> windows_to_compare(previous_end=10 * h, days_published=[], boundary=12 * h,
    ...                    closed_until=11 * h + 90_000, held_from=0)
    [(36000000, 39660000)]
    >>> windows_to_compare(previous_end=None, days_published=[], boundary=12 * h,
    ...                    closed_until=12 * h, held_from=0)
    []
    """
    if boundary is None or closed_until is None:
        return []
    days = sorted(days_published)
    start = previous_end if previous_end is not None else (_day_ms(days[0]) if days else None)
    if start is None:
        return []
    lo = max(start, -(-held_from // MINUTE_MS) * MINUTE_MS)
    hi = _floor(min(boundary, closed_until))
    ranges: Ranges = [(lo, hi)] if lo < hi else []
    for day in sorted(set(skip_days)):
        d0, d1 = _day_ms(day), _day_ms(day) + DAY_MS
        ranges = [
            part
            for a, b in ranges
            for part in ((a, min(b, d0)), (max(a, d1), b))
            if part[0] < part[1]
        ]
    return ranges


def _windows(ranges: Ranges) -> list[int]:
    return [w for lo, hi in ranges for w in range(lo, hi, MINUTE_MS)]


def _date(ms: int) -> date:
    return datetime.fromtimestamp(ms / 1000, UTC).date()


def _days_of(ranges: Ranges) -> set[date]:
    return {_date(w) for w in _windows(ranges)}


def late_rows(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    views: Iterable[ViewSpec],
    days: Iterable[date],
) -> dict[str, LateRows]:
    """Per view, the ``(window, key)`` rows touched by an event the speed layer may have dropped
    as late: silver events of ``days`` received more than ``watermark - future tolerance -
    reconcile_margin_s`` after their event time, through each view's build function."""
    from pyspark.sql import functions as F

    days = list(days)
    out: dict[str, LateRows] = {view.name: defaultdict(set) for view in views}
    if not days:
        return out
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance.total_seconds()
    watermark = interval_seconds(settings.speed.watermark)
    after_us = int((watermark - tolerance - settings.batch.reconcile_margin_s) * 1_000_000)
    behind = F.unix_micros(F.col("receivedAt")) - F.unix_micros(F.col("event_time"))
    silver = spark.read.format("delta").load(silver_path(settings, spec))
    late = silver.where(F.col("event_date").isin(days) & F.coalesce(behind > after_us, F.lit(True)))
    late = late.persist()
    try:
        for view in views:
            rows = view.build(late).select(F.unix_millis("window_start"), *view.keys).collect()
            for window, *key in rows:
                out[view.name][window].add(tuple(key))
    finally:
        late.unpersist()
    return out


def reconcile_view(
    session: Session,
    keyspace: str,
    view: ViewSpec,
    ranges: Ranges,
    *,
    batch_versions: dict[date, int],
    speed_version: int,
    late: LateRows | None = None,
    concurrency: int = 64,
) -> ViewDrift:
    """Compare one view's batch and speed rows of every window in ``ranges``."""
    from core.cassandra import fetch_all

    measures = [m.name for m in view.measures]
    batch = session.prepare(ViewTables(view, keyspace, "batch").select_minute(measures))
    speed_tables = ViewTables(view, keyspace, "speed", table_version=speed_version)
    speed = session.prepare(speed_tables.select_minute(measures))
    width = len(view.keys)
    result = ViewDrift(view.name, speed_version=speed_version)
    windows = _windows(ranges)
    if windows:
        result.window_from, result.window_to = windows[0], windows[-1] + MINUTE_MS
    late = late or {}
    for first in range(0, len(windows), _CHUNK):
        chunk = windows[first : first + _CHUNK]
        reads, sides = [], []
        for window in chunk:
            start = datetime.fromtimestamp(window / 1000, UTC)
            version = batch_versions.get(start.date())
            sides.append(version is not None)
            if version is not None:
                reads.append((batch, (start, version)))
            reads.append((speed, (start,)))
        found = iter(fetch_all(session, reads, concurrency))
        for window, has_batch in zip(chunk, sides, strict=True):
            batch_rows = next(found) if has_batch else []
            speed_rows = next(found)
            result.add_window(
                view,
                window,
                {tuple(r[:width]): tuple(r[width:]) for r in batch_rows},
                {tuple(r[:width]): tuple(r[width:]) for r in speed_rows},
                late.get(window, ()),
            )
    return result


def reconcile(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    run_id: str = "manual",
    now: datetime | None = None,
) -> ReconcileRun:
    """Compare every view's closed windows since the last passed reconciliation; record the
    results; raise :class:`LayersDisagree` when a view drifted beyond the threshold."""
    from core.cassandra import connect

    now = now or datetime.now(UTC)
    ledger = Ledger(spark, settings, spec)
    entries = ledger.entries()
    work = pending(entries, "publish", "reconcile")
    published = {day for e in work for day in e.days}
    as_of = max((e.as_of for e in entries if e.step == "publish" and e.as_of), default=None)
    previous = _previous_ends(entries)
    forgotten = {d for e in entries if e.step == "silver" and "forget" in e.detail for d in e.days}
    threshold = settings.batch.reconcile_max_differing_windows
    keyspace = settings.cassandra.keyspace
    views = spec.view_specs
    cluster, session = connect(settings.cassandra)
    try:
        boundaries = read_boundaries(settings.cassandra, spec.views, session=session)
        speed_versions = read_speed_versions(session, keyspace, spec.views)
        run_key = spec.stream_settings(settings).speed.checkpoint_name  # its live runs
        floor = read_live_floor(session, keyspace, run_key)
        held = settings.speed.ttl_s - settings.batch.reconcile_ttl_margin_s
        held_from = max(_ms(now) - held * 1000, _ms(floor) if floor else 0)
        watermarks = _speed_watermarks(session, keyspace, spec.views)
        lag_ms = interval_seconds(settings.speed.watermark) + settings.batch.reconcile_margin_s
        cut = None if as_of is None else _ms(as_of) - lag_ms * 1000
        plans = {
            view.name: _plan(
                boundaries[view.name],
                watermarks.get(view.name),
                cut,
                previous.get(view.name),
                published,
                held_from,
                forgotten,
            )
            for view in views
        }
        days = sorted({d for ranges, _, _ in plans.values() for d in _days_of(ranges)})
        late = late_rows(spark, settings, spec, views, days)
        select_days = session.prepare(PointerTables(keyspace).select_days)
        results = []
        for view in views:
            ranges, _, note = plans[view.name]
            versions = {
                _as_date(r.day): r.version for r in session.execute(select_days, (view.name,))
            }
            result = reconcile_view(
                session,
                keyspace,
                view,
                ranges,
                batch_versions=versions,
                speed_version=speed_versions[view.name],
                late=late[view.name],
            )
            result.note = note
            results.append(result)
        passed = all(r.windows_differing <= threshold for r in results)
        text = report_markdown(spec.name, run_id, now, results, threshold)
        path = _write_report(settings, spec, run_id, text, results)
        _record(session, keyspace, run_id, now, results, threshold, str(path))
    finally:
        cluster.shutdown()
    summaries = {  # the lists of windows and rows stay in the report
        r.view: {k: v for k, v in r.as_dict().items() if k not in ("examples", "differing_windows")}
        | {"resume_at": plans[r.view][1]}
        for r in results
    }
    ledger.append(
        Entry(
            "reconcile",
            run_id,
            datetime.now(UTC),
            tuple(days),
            as_of,
            passed,
            detail={"threshold": threshold, "report": str(path), "views": summaries},
            consumed=tuple(e.entry_id for e in work) if passed else (),
        )
    )
    for r in results:
        figures = summaries[r.view]
        log_event(_log, "reconcile.checked", pipeline=spec.name, run_id=run_id, **figures)
        if r.windows_differing > threshold:
            log_event(
                _log,
                "reconcile.drift",
                logging.ERROR,
                pipeline=spec.name,
                view=r.view,
                windows_differing=r.windows_differing,
                threshold=threshold,
                largest_at=figures["largest_at"],
                report=str(path),
            )
    if not passed:
        raise LayersDisagree(f"The speed and batch views disagree; report: {path}\n\n{text}")
    return ReconcileRun(passed, summaries, str(path))


def _plan(
    boundary: Boundary | None,
    watermark: int | None,
    cut: int | None,
    previous_end: int | None,
    published: set[date],
    held_from: int,
    forgotten: set[date],
) -> tuple[Ranges, int | None, str]:
    """One view's windows to compare, where the next run resumes, and a note on what was not
    compared. ``cut``: the batch cut less the watermark delay and the margin."""
    at = None if boundary is None else _ms(boundary.at)
    closed = None if watermark is None or cut is None else min(watermark, cut)
    ranges = windows_to_compare(
        previous_end=previous_end,
        days_published=published,
        boundary=at,
        closed_until=closed,
        held_from=held_from,
        skip_days=forgotten,
    )
    if at is None or closed is None:
        return ranges, previous_end, _note(at, watermark, cut, [])
    edge = _floor(min(at, closed))
    skipped = [
        d for d in sorted(forgotten) if held_from < _day_ms(d) + DAY_MS and _day_ms(d) < edge
    ]
    return ranges, max(previous_end or 0, edge), _note(at, watermark, cut, skipped)


def _previous_ends(entries: list[Entry]) -> dict[str, int]:
    """Per view, where the passed reconciliations got to (epoch ms)."""
    ends: dict[str, int] = {}
    for entry in entries:
        if entry.step != "reconcile" or not entry.passed:
            continue
        for view, figures in entry.detail.get("views", {}).items():
            if figures.get("resume_at") is not None:
                ends[view] = max(ends.get(view, 0), int(figures["resume_at"]))
    return ends


def _speed_watermarks(session: Session, keyspace: str, views: Iterable[str]) -> dict[str, int]:
    """Per view, the speed layer's watermark (epoch ms), when it reported one."""
    select = session.prepare(PointerTables(keyspace).select_freshness_ms)
    out = {}
    for name in views:
        row = session.execute(select, (name,)).one()
        if row is not None and row[1] is not None:
            out[name] = int(row[1])
    return out


def _note(boundary: int | None, watermark: int | None, cut: int | None, skipped: list[date]) -> str:
    """Why a view has no window to compare, or which days it left out."""
    if boundary is None:
        return "the batch layer never published this view"
    if watermark is None:
        return "the speed layer reports no watermark for this view"
    if cut is None:
        return "no publish recorded when bronze fixed its end"
    if skipped:
        return "days left out (a user was forgotten): " + ", ".join(d.isoformat() for d in skipped)
    return ""


def _as_date(value: Any) -> date:
    # The driver returns cassandra.util.Date for CQL ``date``.
    return value if isinstance(value, date) else value.date()


def _write_report(
    settings: Settings, spec: PipelineSpec, run_id: str, text: str, results: list[ViewDrift]
) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run_id)
    folder = settings.batch.reports_dir / spec.name / safe
    folder.mkdir(parents=True, exist_ok=True)
    payload = {"pipeline": spec.name, "run_id": run_id, "views": [r.as_dict() for r in results]}
    (folder / "reconcile.json").write_text(json.dumps(payload, indent=2, default=str))
    path = folder / "reconcile.md"
    path.write_text(text)
    return path


def _record(
    session: Session,
    keyspace: str,
    run_id: str,
    now: datetime,
    results: list[ViewDrift],
    threshold: int,
    report: str,
) -> None:
    """One ``reconcile_results`` row per view (what serving and ``status`` show)."""
    insert = session.prepare(PointerTables(keyspace).insert_reconcile)

    def moment(ms: int | None) -> datetime | None:
        return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC)

    for r in results:
        session.execute(
            insert,
            (
                r.view,
                now,
                run_id,
                moment(r.window_from),
                moment(r.window_to),
                r.windows_compared,
                r.windows_differing,
                r.rows_compared,
                r.rows_differing,
                r.rows_skipped_late,
                r.largest_difference,
                r.largest.describe() if r.largest else None,
                r.speed_version,
                threshold,
                r.windows_differing <= threshold,
                report,
            ),
        )
