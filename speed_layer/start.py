"""Where a speed-layer run starts reading the log, and from which window its output is exact.

A *run* of the speed layer is one generation of checkpoints. Generation 0
is ``<checkpoint_root>/<checkpoint_name>/<view>`` and starts at
``settings.speed.starting_offsets``. ``python -m speed_layer reset`` opens
generation N+1 (``<checkpoint_name>.rN/<view>``) from a chosen point of the
log, so a checkpoint whose state went wrong (say, a watermark pushed into the
future before the event-time bound existed) is left behind, not repaired.

A run that starts in the middle of the log has not seen what came before
its start offsets. Its aggregates for the windows those earlier records
belong to would be partial, and writing them as absolute upserts would
overwrite complete values. So every run has a **floor**: it writes only
windows starting at or after it, and leaves older windows as the views hold
them (the batch layer places late events there). The floor is the start
point plus the event-time tolerance, rounded up to a whole window: a record
before the start offsets was received before the start time (Kafka's
record timestamp is set when the collector produces it, after
``receivedAt``), so its event time lies before start + tolerance. Every
window at or after the floor therefore sees all of its records, and the
replayed values equal what an uninterrupted run would have written.

- ``earliest``: the log from its first retained record; no floor while no
  partition has lost records to retention, else the newest of the first
  retained records' timestamps.
- ``<timestamp>``: the first offsets at or after that moment.
- ``latest``: only what arrives from now on.

Every run writes one output *version* of the speed tables
(:attr:`layout.views.ViewTables.table_version`). A reset keeps the version
(it repairs the live tables in place); a Kappa replay
(:mod:`speed_layer.replay`) writes a new one beside the live run, and takes
over when it has caught up. A run's **state** says which it is: ``live``
(the run serving reads; the newest live run is the one the job resumes),
``replaying`` (a new version catching up), ``switching`` (a replay the
job is making the live run: the switch's recorded intent, completed by
the job's next poll or start, :func:`speed_layer.replay.resume_switch`),
``retired`` (replaced by a replay; its version is dropped after a grace
period) or ``abandoned``.

Runs are recorded in Cassandra (``speed_runs``, :mod:`layout.pointers`), where
the job, ``status`` and operators read them, whatever the checkpoint store.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from core.cassandra import prepare
from core.settings import KafkaSettings, Settings
from layout.pointers import PointerTables
from views.common import interval_seconds

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = [
    "ABANDONED",
    "LIVE",
    "REPLAYING",
    "RETIRED",
    "SWITCHING",
    "StartPosition",
    "current_start",
    "floor_of",
    "parse_from",
    "pending_replay",
    "read_runs",
    "record_start",
    "resolve_offsets",
    "spark_offsets",
    "update_run",
    "window_seconds",
]

LIVE, REPLAYING, RETIRED, ABANDONED = "live", "replaying", "retired", "abandoned"
SWITCHING = "switching"
"""The states of a run (``speed_runs.state``; a run recorded before states existed is live)."""


@dataclass(frozen=True)
class StartPosition:
    """One run (generation of checkpoints) of the speed layer."""

    generation: int = 0
    starting_offsets: str | None = None
    """Spark's ``startingOffsets`` JSON (``{"topic": {"0": 42}}``); None: the settings'."""
    floor: datetime | None = None
    """Windows starting before this are not written by this run; None: every window."""
    requested: str = "settings"
    """What the operator asked for: ``earliest``, ``latest``, a timestamp, or ``settings``."""
    created_at: datetime | None = None
    version: int = 0
    """The version of the speed tables the run writes."""
    state: str = LIVE
    """:data:`LIVE`, :data:`REPLAYING`, :data:`SWITCHING`, :data:`RETIRED` or
    :data:`ABANDONED`."""
    retired_at: datetime | None = None
    """When a replay replaced it (or it was abandoned)."""
    dropped_at: datetime | None = None
    """When its version's tables were dropped."""

    def checkpoint_dir(self, settings: Settings) -> str:
        base = f"{settings.lake.checkpoint_root.rstrip('/')}/{settings.speed.checkpoint_name}"
        return base if self.generation == 0 else f"{base}.r{self.generation}"

    @property
    def query_name(self) -> str:
        """The name of the run's streaming query (unique in a session: two runs side by side
        during a replay).

        >>> StartPosition().query_name, StartPosition(generation=4).query_name
        ('speed_views', 'speed_views_r4')
        """
        return "speed_views" if self.generation == 0 else f"speed_views_r{self.generation}"


def parse_from(text: str) -> str | datetime:
    """``earliest``, ``latest`` or an ISO-8601 moment (naive: UTC).

    >>> parse_from("earliest")
    'earliest'
    >>> parse_from("2026-11-23T10:00:00+01:00")
    datetime.datetime(2026, 11, 23, 9, 0, tzinfo=datetime.timezone.utc)
    """
    if text in ("earliest", "latest"):
        return text
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"--from-offsets must be earliest, latest or an ISO-8601 time, got {text!r}"
        ) from None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


def window_seconds(window: str) -> int:
    """``"1 minute"`` -> 60: the length of a view's window (:func:`views.common.interval_seconds`).

    >>> window_seconds("5 minutes")
    300
    """
    return interval_seconds(window)


def floor_of(start: datetime | None, tolerance: timedelta, window_s: int) -> datetime | None:
    """The first window a run starting at ``start`` sees whole (None: every window).

    >>> floor_of(datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC), timedelta(seconds=60), 60)
    datetime.datetime(2026, 1, 1, 10, 2, tzinfo=datetime.timezone.utc)
    >>> floor_of(datetime(2026, 1, 1, 10, 0, tzinfo=UTC), timedelta(seconds=60), 60)
    datetime.datetime(2026, 1, 1, 10, 1, tzinfo=datetime.timezone.utc)
    """
    if start is None:
        return None
    edge = (start + tolerance).timestamp()
    return datetime.fromtimestamp(math.ceil(edge / window_s) * window_s, UTC)


def resolve_offsets(
    kafka: KafkaSettings, topic: str, request: str | datetime, timeout_s: float = 10
) -> tuple[dict[int, int], datetime | None]:
    """(start offset per partition, the moment the run starts seeing everything after).

    The moment is None when the run starts at the very beginning of every
    partition (nothing lost to retention).
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        kafka.client_config() | {"group.id": "speed-layer-reset", "enable.auto.commit": False}
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            raise RuntimeError(f"topic {topic!r} not found on {kafka.bootstrap_servers}")
        partitions = sorted(metadata.partitions)
        bounds = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            for p in partitions
        }
        if request == "latest":
            return {p: high for p, (_, high) in bounds.items()}, datetime.now(UTC)
        if request == "earliest":
            offsets = {p: low for p, (low, _) in bounds.items()}
            truncated = [p for p, low in offsets.items() if low > 0]
            firsts = [_record_time(consumer, topic, p, offsets[p], timeout_s) for p in truncated]
            known = [t for t in firsts if t is not None]
            return offsets, max(known) if known else None
        millis = int(request.timestamp() * 1000)
        found = consumer.offsets_for_times(
            [TopicPartition(topic, p, millis) for p in partitions], timeout=timeout_s
        )
        # -1: nothing at or after that moment yet; start at the end.
        offsets = {
            tp.partition: tp.offset if tp.offset >= 0 else bounds[tp.partition][1] for tp in found
        }
        return offsets, request
    finally:
        consumer.close()


def _record_time(consumer: Any, topic: str, partition: int, offset: int, timeout_s: float):
    from confluent_kafka import TopicPartition

    consumer.assign([TopicPartition(topic, partition, offset)])
    message = consumer.poll(timeout_s)
    if message is None or message.error() is not None:
        return None
    _, millis = message.timestamp()
    return datetime.fromtimestamp(millis / 1000, UTC)


def spark_offsets(topic: str, offsets: dict[int, int]) -> str:
    """Spark's ``startingOffsets`` JSON for concrete offsets."""
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def read_runs(session: Session, settings: Settings) -> list[StartPosition]:
    """Every run of the speed layer's checkpoint name, newest first."""
    select = prepare(session, PointerTables(settings.cassandra.keyspace).select_runs)
    return [
        StartPosition(
            row.generation,
            row.starting_offsets,
            _utc(row.floor),
            row.requested or "settings",
            _utc(row.created_at),
            row.version or 0,
            row.state or LIVE,
            _utc(row.retired_at),
            _utc(row.dropped_at),
        )
        for row in session.execute(select, (settings.speed.checkpoint_name,))
    ]


def current_start(session: Session, settings: Settings) -> StartPosition:
    """The run the job should resume or start: the newest live one, or the replay a switch
    is making live (generation 0 when the layer was never reset or replayed)."""
    live = [run for run in read_runs(session, settings) if run.state in (LIVE, SWITCHING)]
    return live[0] if live else StartPosition()


def pending_replay(session: Session, settings: Settings) -> StartPosition | None:
    """The replay catching up beside the live run, if one was asked for."""
    runs = read_runs(session, settings)
    live = next((run.generation for run in runs if run.state == LIVE), -1)
    return next((r for r in runs if r.state == REPLAYING and r.generation > live), None)


def record_start(session: Session, settings: Settings, start: StartPosition) -> None:
    session.execute(
        prepare(session, PointerTables(settings.cassandra.keyspace).insert_run),
        (
            settings.speed.checkpoint_name,
            start.generation,
            start.starting_offsets,
            start.floor,
            start.requested,
            start.created_at,
            start.version,
            start.state,
        ),
    )


def update_run(
    session: Session,
    settings: Settings,
    generation: int,
    *,
    expect: str | None = None,
    **columns: Any,
) -> bool:
    """Set columns of ``speed_runs`` (:data:`layout.pointers.RUNS_COLUMNS`) of one run; with
    ``expect``, only while the run is still in that state (a lightweight transaction), and
    whether it was. Without, always True."""
    tables = PointerTables(settings.cassandra.keyspace)
    statement = prepare(session, tables.update_run(list(columns), if_state=expect is not None))
    values = (*columns.values(), settings.speed.checkpoint_name, generation)
    done = session.execute(statement, values if expect is None else (*values, expect))
    return True if expect is None else bool(done.was_applied)
