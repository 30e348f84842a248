"""Kappa reprocessing: replay the retained log into a new version of the speed tables.

Kreps' recipe, as the speed job runs it (:mod:`speed_layer.service`):

1. ``python -m speed_layer replay --from earliest|TIMESTAMP`` records a run
   in state ``replaying`` with a new output version ``N`` and creates the
   tables ``speed_vN_<view>`` (:func:`request_replay`);
2. the running speed job sees it within ``replay_poll_s`` and starts a
   second streaming query, from the chosen offsets into version N, beside
   the live one; its catch-up (Kafka lag, newest event time, rates) is
   written to its ``speed_runs`` row and shown by ``platformctl status``;
3. once its lag stays within ``replay_max_lag`` records for
   ``replay_sustain_s`` (:class:`CatchUp`), the job switches (:func:`switch`),
   one recoverable transition of four statements, :data:`SWITCH_STEPS`: it
   records its intent (the replay's run becomes ``switching``), moves every
   view's ``speed_versions`` pointer to N in one logged batch, retires the
   runs that were live, and makes the replay the live run; then the old
   query stops. A switch interrupted after its intent (a failed statement, a
   crash) is completed by the job's next poll or start
   (:func:`resume_switch`) from what ``speed_runs`` holds, so serving never
   stays on a version nobody writes. Serving reads the pointer (cached for
   ``pointer_cache_s``) and says the version in every answer;
4. the old version's tables are dropped ``replay_grace_s`` later, when no
   reader can still hold the old pointer (:func:`drop_superseded`).

Until the switch, serving reads the old version, so a dashboard never sees
a half-rebuilt table. The same path changes a view's definition (the new
code's views write the new version whole) and repairs a damaged speed layer
(lost rows, a bad checkpoint): nothing is repaired in place.

A replay that starts after the beginning of the log has a floor
(:mod:`speed_layer.start`): windows before it would be missing from the new
version, so it is refused while the floor lies after a view's batch
boundary (serving would show the hole), unless forced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from core.cassandra import execute_schema, logged_batch, prepare
from core.log import get_logger, log_event
from core.settings import Settings
from layout import PointerTables, ViewTables, create_tables, create_view_tables
from layout.reads import read_boundaries, read_speed_versions
from speed_layer.start import (
    ABANDONED,
    LIVE,
    REPLAYING,
    RETIRED,
    SWITCHING,
    StartPosition,
    current_start,
    parse_from,
    pending_replay,
    read_runs,
    record_start,
    update_run,
)
from views import ViewSpec

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = [
    "SWITCH_STEPS",
    "CatchUp",
    "ReplayAbandoned",
    "ReplayRefused",
    "abandon_replay",
    "drop_superseded",
    "replay_for_forget",
    "request_replay",
    "resume_switch",
    "switch",
]

_log = get_logger(__name__)


class ReplayRefused(RuntimeError):
    """The replay cannot start as asked (one is already running, or it would leave a hole)."""


class ReplayAbandoned(RuntimeError):
    """A switch found its replay no longer catching up: abandoned between the job's poll and
    the switch's intent, which is conditional on the run's state, as the abandon is."""


def request_replay(
    settings: Settings,
    from_offsets: str,
    *,
    views: Sequence[ViewSpec],
    force: bool = False,
) -> StartPosition:
    """Record a replay of the pipeline of ``views`` (``settings``: its stream settings) from
    ``from_offsets`` into a new version and create its tables."""
    from core.cassandra import connect
    from speed_layer.reset import start_point

    request = parse_from(from_offsets)
    create_tables(settings, views)
    cluster, session = connect(settings.cassandra)
    try:
        pending = pending_replay(session, settings)
        if pending is not None:
            raise ReplayRefused(
                f"replay run {pending.generation} into version {pending.version} is "
                "already catching up; wait for its switch or abandon it "
                "(python -m speed_layer replay --abandon)"
            )
        runs = read_runs(session, settings)
        pointed = read_speed_versions(session, settings.cassandra.keyspace, [v.name for v in views])
        point = start_point(settings, request, from_offsets, views)
        if point["floor"] is not None and not force:
            _refuse_hole(settings, point["floor"], [v.name for v in views], session)
        replay = StartPosition(
            generation=max((r.generation for r in runs), default=0) + 1,
            created_at=datetime.now(UTC),
            version=max([0, *(r.version for r in runs), *pointed.values()]) + 1,
            state=REPLAYING,
            **point,
        )
        for spec in views:
            tables = ViewTables(
                spec, settings.cassandra.keyspace, "speed", table_version=replay.version
            )
            create_view_tables(session, tables, settings.speed.ttl_s)
        record_start(session, settings, replay)
    finally:
        cluster.shutdown()
    log_event(
        _log,
        "speed.replay_requested",
        generation=replay.generation,
        version=replay.version,
        starting_offsets=replay.starting_offsets,
        floor=replay.floor.isoformat() if replay.floor else None,
    )
    return replay


def replay_for_forget(settings: Settings, views: Sequence[ViewSpec]) -> StartPosition:
    """Recount what the speed layer serves of ``views`` (``settings``: their pipeline's stream
    settings) after a person was forgotten: a replay of the log from a window before their
    earliest batch boundary (from the beginning while one was never published), into a new
    version whose queries leave out the people forgotten by then
    (:mod:`speed_layer.forgotten`). Until its switch, serving reads the version that still
    counts them. A replay already catching up started before this forget's suppression,
    so it is abandoned and this one takes its place."""
    from core.event_time import EventTimeBounds
    from speed_layer.start import window_seconds

    boundaries = read_boundaries(settings.cassandra, [v.name for v in views])
    known = [b.at for b in boundaries.values() if b is not None]
    since = "earliest"
    if known and len(known) == len(views):
        # a run from here sees whole every window from the boundary on (its floor)
        window = timedelta(seconds=max(window_seconds(v.window) for v in views))
        tolerance = EventTimeBounds.from_settings(settings).future_tolerance
        since = (min(known) - tolerance - window).isoformat()
    abandoned = abandon_replay(settings)
    replay = request_replay(settings, since, views=views)
    log_event(
        _log,
        "speed.replay_for_forget",
        generation=replay.generation,
        version=replay.version,
        since=since,
        abandoned=None if abandoned is None else abandoned.generation,
    )
    return replay


def _refuse_hole(settings: Settings, floor: datetime, views: list[str], session: Session) -> None:
    boundaries = read_boundaries(settings.cassandra, views, session=session)
    for name, boundary in boundaries.items():
        if boundary is None or boundary.at < floor:
            after = "every window" if boundary is None else f"windows from {boundary.at:%F %T}"
            raise ReplayRefused(
                f"the replay would write windows from {floor:%F %T} on, but serving reads "
                f"{after} of {name!r} from the speed layer: the new version would miss the "
                "windows in between. Replay from earlier (--from earliest), or pass --force."
            )


def abandon_replay(settings: Settings) -> StartPosition | None:
    """Give up the replay catching up (the job stops its query; its tables are dropped after
    the grace period). Returns it, or None when there was none."""
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    try:
        replay = pending_replay(session, settings)
        if replay is None:
            return None
        now = datetime.now(UTC)
        if not update_run(
            session,
            settings,
            replay.generation,
            expect=REPLAYING,
            state=ABANDONED,
            retired_at=now,
        ):
            # Its switch recorded its intent first: it completes, and the run goes live.
            log_event(_log, "speed.replay_abandon_too_late", generation=replay.generation)
            return None
        log_event(_log, "speed.replay_abandoned", generation=replay.generation)
        return replay
    finally:
        cluster.shutdown()


@dataclass
class CatchUp:
    """Whether a replay has caught up: its lag within ``max_lag`` for ``sustain_s`` in a row.

    >>> c = CatchUp(max_lag=10, sustain_s=5)
    >>> c.observe(500, 0.0), c.observe(3, 1.0), c.observe(2, 5.0), c.observe(0, 6.0)
    (False, False, False, True)
    >>> c.observe(11, 7.0), c.since is None
    (False, True)
    """

    max_lag: int
    sustain_s: float
    since: float | None = None
    """When the lag last came within ``max_lag`` (monotonic seconds); None: it is not."""

    def observe(self, lag: int | None, now: float) -> bool:
        if lag is None or lag > self.max_lag:
            self.since = None
            return False
        if self.since is None:
            self.since = now
        return now - self.since >= self.sustain_s


SWITCH_STEPS = ("intent", "pointers", "retire", "promote")
"""The statements of a switch, in order (:func:`switch`); each is named to ``on_step`` before
it runs."""

OnStep = Callable[[str], None]
LIVE_STATES = (LIVE, SWITCHING)


def switch(
    session: Session,
    settings: Settings,
    live: StartPosition,
    replay: StartPosition,
    views: Sequence[ViewSpec],
    *,
    on_step: OnStep | None = None,
) -> datetime:
    """Make ``replay`` the live run in place of ``live``; returns the moment of the switch.

    One recoverable transition: first the intent (the replay's run becomes
    :data:`SWITCHING`), then what :func:`resume_switch` completes from it should
    this stop half way: every view's pointer to the replay's version (one logged
    batch: all or none), the runs that were live retired, the replay live.
    ``on_step(step)`` is called before each statement (:data:`SWITCH_STEPS`).
    """
    now = datetime.now(UTC)
    _step(on_step, "intent")
    if not update_run(
        session, settings, replay.generation, expect=REPLAYING, state=SWITCHING, switched_at=now
    ):
        raise ReplayAbandoned(
            f"replay run {replay.generation} was abandoned (or replaced) before its switch"
        )
    _complete(session, settings, replace(replay, state=SWITCHING), views, now, on_step)
    log_event(
        _log,
        "speed.replay_switched",
        generation=replay.generation,
        version=replay.version,
        previous_version=live.version,
        views=[spec.name for spec in views],
    )
    return now


def resume_switch(
    session: Session,
    settings: Settings,
    views: Sequence[ViewSpec],
    *,
    on_step: OnStep | None = None,
) -> StartPosition | None:
    """Complete a switch interrupted after its intent; return the run it made live (None:
    no switch was interrupted). Safe to repeat: every statement of a switch is idempotent."""
    switching = next((r for r in read_runs(session, settings) if r.state == SWITCHING), None)
    if switching is None:
        return None
    log_event(
        _log,
        "speed.switch_resumed",
        generation=switching.generation,
        version=switching.version,
    )
    _complete(session, settings, switching, views, datetime.now(UTC), on_step)
    return replace(switching, state=LIVE)


def _step(on_step: OnStep | None, step: str) -> None:
    if on_step is not None:
        on_step(step)


def _complete(
    session: Session,
    settings: Settings,
    run: StartPosition,
    views: Sequence[ViewSpec],
    now: datetime,
    on_step: OnStep | None,
) -> None:
    """The statements of a switch after its intent: pointers, retire, promote."""
    _step(on_step, "pointers")
    pointer = prepare(session, PointerTables(settings.cassandra.keyspace).insert_speed_version)
    session.execute(
        logged_batch([(pointer, (spec.name, run.version, run.generation, now)) for spec in views])
    )
    _step(on_step, "retire")
    runs = read_runs(session, settings)
    older = [r.generation for r in runs if r.generation < run.generation and r.state in LIVE_STATES]
    if all(r.generation != 0 for r in runs):
        older.append(0)  # the first run is live without a row until a switch retires it
    for generation in older:
        update_run(session, settings, generation, state=RETIRED, retired_at=now)
    _step(on_step, "promote")
    update_run(session, settings, run.generation, state=LIVE)


def point_new_views(
    session: Session, settings: Settings, live: StartPosition, views: Sequence[ViewSpec]
) -> list[str]:
    """Point each view that has no ``speed_versions`` row at ``live``'s version; return their
    names. Only a switch writes pointers, so a view added after one read version 0 (empty)
    while the live run wrote ``speed_v<N>_<view>``: served as zeros with normal freshness."""
    if live.version == 0:
        return []  # no pointer reads as version 0: the first run's tables
    tables = PointerTables(settings.cassandra.keyspace)
    names = [spec.name for spec in views]
    select = prepare(session, tables.select_speed_versions)
    pointed = {row.view_name for row in session.execute(select, (names,))}
    missing = [name for name in names if name not in pointed]
    if missing:
        pointer = prepare(session, tables.insert_speed_version)
        now = datetime.now(UTC)
        session.execute(
            logged_batch(
                [(pointer, (name, live.version, live.generation, now)) for name in missing]
            )
        )
        log_event(_log, "speed.views_pointed", version=live.version, views=missing)
    return missing


def drop_superseded(
    session: Session, settings: Settings, views: Sequence[ViewSpec], now: datetime | None = None
) -> list[int]:
    """Drop the tables of versions retired or abandoned at least ``replay_grace_s`` ago that
    no live or replaying run writes; returns the versions dropped."""
    now = now or datetime.now(UTC)
    grace = timedelta(seconds=settings.speed.replay_grace_s)
    runs = read_runs(session, settings)
    in_use = {current_start(session, settings).version}
    replay = pending_replay(session, settings)
    if replay is not None:
        in_use.add(replay.version)
    in_use |= set(
        read_speed_versions(session, settings.cassandra.keyspace, [v.name for v in views]).values()
    )
    dropped = []
    for run in runs:
        due = run.retired_at is not None and now - run.retired_at >= grace
        if run.state not in (RETIRED, ABANDONED) or run.dropped_at is not None or not due:
            continue
        if run.version not in in_use:
            for spec in views:
                tables = ViewTables(
                    spec, settings.cassandra.keyspace, "speed", table_version=run.version
                )
                for statement in tables.drop():
                    execute_schema(session, statement)
            dropped.append(run.version)
            log_event(_log, "speed.version_dropped", version=run.version, generation=run.generation)
            update_run(session, settings, run.generation, dropped_at=now)
        # A version still in use is tried again at a later poll, once nothing reads it.
    return dropped
