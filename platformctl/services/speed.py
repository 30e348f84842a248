"""The streaming speed layer (``python -m speed_layer``) as a local service.

Its probe reads the progress the job records in Cassandra after each
micro-batch, one row per view: the job is healthy while every view's query
reports recently and no watermark runs ahead of now. Its detail also says
what the batch layer's last reconciliation found (``reconcile_results``):
how many closed windows it compared, and any view whose speed rows drifted
from the batch rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from core.settings import Settings
from platformctl.process import ManagedProcess, port_open
from platformctl.services.base import Service, python_process

__all__ = [
    "SERVICE",
    "healthy",
    "process",
    "progress",
    "reconcile_summary",
    "runs_summary",
    "view_progress_health",
]


def process(settings: Settings) -> ManagedProcess:
    """The streaming speed layer (a Spark driver running a query per streamed pipeline)."""
    return python_process(settings, "speed", ["speed_layer"], ports=(settings.speed.metrics_port,))


def progress(settings: Settings) -> dict[str, dict]:
    """The speed layer's progress per view, as recorded after each micro-batch."""
    from core.cassandra import connect
    from layout import PointerTables

    cluster = None
    try:
        cluster, session = connect(settings.cassandra, connect_timeout_s=5, schema=False)
        rows = session.execute(PointerTables(settings.cassandra.keyspace).select_progress())
        return {row.view_name: row._asdict() for row in rows}
    except Exception:  # Cassandra busy, or the table does not exist before the first start
        return {}
    finally:
        if cluster is not None:
            cluster.shutdown()


def healthy(settings: Settings, max_silence_s: float = 60.0) -> tuple[bool, str]:
    """Probe: every view's query reported progress recently and its watermark is not ahead
    of now; detail = freshness, lag, rates and the rows dropped (late, future)."""
    from core.event_time import EventTimeBounds
    from speed_layer.streams import streamed

    if not port_open(settings.cassandra.port, settings.cassandra.contact_points[0]):
        return False, "Cassandra is down: progress unknown"
    rows = progress(settings)
    now = datetime.now(UTC)
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    started = process(settings).started_at()
    specs = streamed(settings)
    verdicts = [
        view_progress_health(view, rows.get(view), now, tolerance, started, max_silence_s)
        for spec in specs
        for view in spec.views
    ]
    lines = [text for _, text in verdicts]
    runs = [runs_summary(spec.stream_settings(settings), now, spec.name) for spec in specs]
    head = [text for text in (*runs, reconcile_summary(settings)) if text]
    return all(ok for ok, _ in verdicts), "; ".join([*head, *lines])


def runs_summary(settings: Settings, now: datetime, name: str = "") -> str:
    """A pipeline's live run and version, and a replay's catch-up while one runs (Kappa);
    ``settings`` are its stream settings."""
    from core.cassandra import connect
    from layout import PointerTables
    from speed_layer.start import LIVE, REPLAYING, SWITCHING

    cluster = None
    try:
        cluster, session = connect(settings.cassandra, connect_timeout_s=5, schema=False)
        select = session.prepare(PointerTables(settings.cassandra.keyspace).select_runs)
        runs = list(session.execute(select, (settings.speed.checkpoint_name,)))
    except Exception:  # Cassandra busy, or the table does not exist before the first start
        return ""
    finally:
        if cluster is not None:
            cluster.shutdown()
    live = next((r for r in runs if (r.state or LIVE) == LIVE), None)
    text = (
        f"{name + ': ' if name else ''}run {live.generation if live else 0} live on version "
        f"{live.version or 0 if live else 0}"
    )
    switching = next((r for r in runs if r.state == SWITCHING), None)
    if switching is not None:
        text += f"; run {switching.generation} switching to version {switching.version}"
    replay = next((r for r in runs if r.state == REPLAYING), None)
    if replay is not None:
        newest = replay.max_event_time
        behind = f"{(now - newest.replace(tzinfo=UTC)).total_seconds():.0f}s" if newest else "?"
        text += (
            f"; replay run {replay.generation} into version {replay.version} catching up: "
            f"lag {replay.kafka_lag}, event time {behind} behind now, "
            f"{replay.processed_rows_per_s or 0:.0f} rows/s"
        )
    return text


def reconcile_summary(settings: Settings) -> str:
    """What the last reconciliation found: ``reconciled 2026-11-23 10:07 UTC: 240 windows, 0
    differing``, or ``DRIFT <view>: 3 of 60 windows differ (...)`` per drifting view."""
    from core.cassandra import connect
    from layout import read_reconcile_results
    from pipelines import declared_views

    cluster = None
    try:
        cluster, session = connect(settings.cassandra, connect_timeout_s=5, schema=False)
        names = [v.name for v in declared_views()]
        rows = read_reconcile_results(session, settings.cassandra.keyspace, names)
    except Exception:  # Cassandra busy, or the table does not exist before the first start
        return ""
    finally:
        if cluster is not None:
            cluster.shutdown()
    return describe_reconciliation(rows)


def describe_reconciliation(rows: dict[str, dict | None]) -> str:
    """:func:`reconcile_summary`'s text from each view's ``reconcile_results`` row.

    >>> at = 1_795_000_000_000
    >>> ok = {"checked_at": at, "windows_compared": 60, "windows_differing": 0, "passed": True}
    >>> describe_reconciliation({"clicks": ok, "site_activity": None})
    'reconciled 2026-11-18 11:06 UTC: 60 windows, 0 differing'
    """
    found = {view: row for view, row in rows.items() if row is not None}
    if not found:
        return ""
    drifting = [
        f"DRIFT {view}: {row['windows_differing']} of {row['windows_compared']} windows differ "
        f"from batch (largest: {row['largest_at']}); docs/operations.md"
        for view, row in found.items()
        if row["passed"] is False
    ]
    if drifting:
        return "; ".join(drifting)
    checked = max(row["checked_at"] or 0 for row in found.values())
    at = datetime.fromtimestamp(checked / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    windows = sum(row["windows_compared"] or 0 for row in found.values())
    differing = sum(row["windows_differing"] or 0 for row in found.values())
    return f"reconciled {at}: {windows} windows, {differing} differing"


def view_progress_health(
    view: str,
    row: dict | None,
    now: datetime,
    tolerance: timedelta,
    started: datetime | None = None,
    max_silence_s: float = 60.0,
) -> tuple[bool, str]:
    """(healthy, one line) for one view's :func:`progress` row (naive times are UTC)."""

    def utc(moment: datetime | None) -> datetime | None:
        return moment.replace(tzinfo=UTC) if moment is not None else None

    row = row or {}
    beat = utc(row.get("heartbeat_at"))
    if (
        beat is None
        or (now - beat).total_seconds() > max_silence_s
        or (started is not None and beat < started)
    ):
        return False, f"{view}: no recent progress"
    watermark = utc(row.get("watermark"))
    if watermark is not None and watermark - now > tolerance:
        return False, (
            f"{view}: ERROR watermark {watermark.isoformat()} is ahead of now; every new event "
            "is dropped as late. Reset the speed layer (docs/operations.md)"
        )
    newest = utc(row.get("max_event_time"))
    fresh = "unknown"
    if newest is not None and newest - now <= tolerance:
        fresh = f"{max(0.0, (now - newest).total_seconds()):.0f}s"
    # A view the job has not folded a micro-batch into yet (its pipeline sent nothing) has a
    # heartbeat and no figures: "none yet", not "Nonems".
    duration = row.get("batch_duration_ms")
    return True, (
        f"{view}: fresh {fresh}, lag {row.get('kafka_lag')}, "
        f"in {row.get('input_rows_per_s') or 0:.0f}/s, "
        f"done {row.get('processed_rows_per_s') or 0:.0f}/s, "
        f"batch {'none yet' if duration is None else f'{duration}ms'}, "
        f"late dropped {row.get('late_rows_dropped') or 0}, "
        f"future dropped {row.get('future_rows_dropped') or 0}, "
        f"rejected {_rejects(row.get('rejected_rows'))}"
    )


def _rejects(by_reason: dict[str, int] | None) -> str:
    """``0``, or the total and each reason: ``3 (unparseable 2, missing:timestamp 1)``."""
    if not by_reason:
        return "0"
    reasons = ", ".join(f"{reason} {rows}" for reason, rows in sorted(by_reason.items()))
    return f"{sum(by_reason.values())} ({reasons})"


SERVICE = Service(name="speed", process=process, probe=healthy, requires=("kafka", "cassandra"))
