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

Runs are recorded in Cassandra (``speed_runs``, :mod:`layout.pointers`), where
the job, ``status`` and operators read them, whatever the checkpoint store.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from core.settings import KafkaSettings, Settings
from layout.pointers import PointerTables

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = [
    "StartPosition",
    "current_start",
    "floor_of",
    "parse_from",
    "record_start",
    "resolve_offsets",
    "spark_offsets",
    "window_seconds",
]

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


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

    def checkpoint_dir(self, settings: Settings) -> str:
        base = f"{settings.lake.checkpoint_root.rstrip('/')}/{settings.speed.checkpoint_name}"
        return base if self.generation == 0 else f"{base}.r{self.generation}"


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
    """``"1 minute"`` -> 60: the length of a view's window.

    >>> window_seconds("5 minutes")
    300
    """
    match = re.fullmatch(r"\s*(\d+)\s+(second|minute|hour|day)s?\s*", window)
    if match is None:
        raise ValueError(f"cannot read the window {window!r}; expected e.g. '1 minute'")
    return int(match[1]) * _UNITS[match[2]]


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


def current_start(session: Session, settings: Settings) -> StartPosition:
    """The run the job should resume or start (generation 0 when never reset)."""
    select = session.prepare(PointerTables(settings.cassandra.keyspace).select_run)
    row = session.execute(select, (settings.speed.checkpoint_name,)).one()
    if row is None:
        return StartPosition()
    return StartPosition(
        row.generation,
        row.starting_offsets,
        row.floor.replace(tzinfo=UTC) if row.floor else None,
        row.requested,
        row.created_at.replace(tzinfo=UTC) if row.created_at else None,
    )


def record_start(session: Session, settings: Settings, start: StartPosition) -> None:
    session.execute(
        session.prepare(PointerTables(settings.cassandra.keyspace).insert_run),
        (
            settings.speed.checkpoint_name,
            start.generation,
            start.starting_offsets,
            start.floor,
            start.requested,
            start.created_at,
        ),
    )
