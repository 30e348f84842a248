"""``python -m speed_layer reset``: open a new run of the speed layer on fresh checkpoints.

For the day a checkpoint's state is wrong (a watermark pushed into the
future, a corrupted state store) or a view's definition changed: the old
checkpoints are left where they are, and the next start of the job reads
the log from the chosen point into the same speed tables. Absolute upserts
make the replay safe; the run's floor (:mod:`speed_layer.start`) keeps it
from overwriting windows it cannot see whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import Settings
from layout import PointerTables, create_tables
from speed_layer.start import (
    StartPosition,
    current_start,
    floor_of,
    parse_from,
    pending_replay,
    read_runs,
    record_start,
    resolve_offsets,
    spark_offsets,
    window_seconds,
)
from views import ViewSpec

__all__ = ["ResetRefused", "reset", "start_point"]

_log = get_logger(__name__)
ALIVE_WITHIN = timedelta(seconds=30)


class ResetRefused(RuntimeError):
    """The job looks alive: a reset under a running job would leave it on the old run."""


def reset(
    settings: Settings,
    from_offsets: str,
    *,
    views: Sequence[ViewSpec],
    force: bool = False,
) -> StartPosition:
    """Record a new run of the pipeline of ``views`` (``settings``: its stream settings)
    starting at ``from_offsets``; the job picks it up at its next start."""
    from core.cassandra import connect

    request = parse_from(from_offsets)
    create_tables(settings, views)
    cluster, session = connect(settings.cassandra)
    try:
        now = datetime.now(UTC)
        if not force:
            _refuse_if_alive(session, settings, now, [v.name for v in views])
        replay = pending_replay(session, settings)
        if replay is not None:
            raise ResetRefused(
                f"replay run {replay.generation} is catching up into version "
                f"{replay.version}; let it switch, or abandon it first "
                "(python -m speed_layer replay --abandon)"
            )
        previous = current_start(session, settings)
        newest = max((run.generation for run in read_runs(session, settings)), default=0)
        start = StartPosition(
            generation=newest + 1,
            **start_point(settings, request, from_offsets, views),
            created_at=now,
            version=previous.version,
        )
        record_start(session, settings, start)
    finally:
        cluster.shutdown()
    log_event(
        _log,
        "speed.reset",
        generation=start.generation,
        previous_checkpoint=previous.checkpoint_dir(settings),
        checkpoint=start.checkpoint_dir(settings),
        starting_offsets=start.starting_offsets,
        floor=start.floor.isoformat() if start.floor else None,
    )
    return start


def start_point(settings: Settings, request, requested: str, views: Sequence[ViewSpec]) -> dict:
    """A new run's ``starting_offsets``, ``floor`` and ``requested`` for a parsed request."""
    topic = settings.kafka.events_topic
    offsets, seen_from = resolve_offsets(settings.kafka, topic, request)
    window_s = max(window_seconds(spec.window) for spec in views)
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    return {
        "starting_offsets": spark_offsets(topic, offsets),
        "floor": floor_of(seen_from, tolerance, window_s),
        "requested": requested,
    }


def _refuse_if_alive(session, settings: Settings, now: datetime, views: list[str]) -> None:
    from core.cassandra import prepare

    pointers = PointerTables(settings.cassandra.keyspace)
    rows = session.execute(
        prepare(session, pointers.select_progress_of(("heartbeat_at", "stopped_at"))),
        (list(views),),  # not another pipeline's: it runs on its own
    )
    for row in rows:
        beat = row.heartbeat_at.replace(tzinfo=UTC) if row.heartbeat_at else None
        stopped = row.stopped_at.replace(tzinfo=UTC) if row.stopped_at else None
        if beat and now - beat < ALIVE_WITHIN and (stopped is None or stopped < beat):
            raise ResetRefused(
                f"the speed layer's {row.view_name} query reported progress "
                f"{(now - beat).total_seconds():.0f}s ago; stop the job first "
                "(python -m platformctl down speed), or pass --force if it is dead"
            )
