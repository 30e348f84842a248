"""Bronze: the raw Kafka log, appended to Delta exactly once per offset.

Bronze is the immutable master dataset: every record of the events topic
(key, value, headers, topic, partition, offset, Kafka timestamp) with the
date it was ingested, kept after Kafka's retention has dropped it. The one
exception is erasure: records of suppressed (forgotten) users are not
appended (:mod:`core.suppressions`), and ``forget`` deletes those it holds.

A run reads the offset range from where the previous run stopped to a
*stable end* fixed before reading (the partitions' high watermarks at the
start of the run) and appends it in one Delta commit that also records the
range (commit ``userMetadata``) and carries Delta's idempotent-write pair
``txnAppId``/``txnVersion``. So:

- a rerun after success starts from the recorded end: nothing is read twice;
- two runs racing over the same range write it once: the second commit has
  the same ``txnVersion`` and Delta skips it;
- a run that fails before its commit leaves nothing behind.

A partition's range never starts before its earliest available offset: the
first run starts there rather than at 0, and when retention deleted records
no run had read, the run skips them, records the gap (``gap`` in the
commit metadata: partition -> [first lost offset, first kept offset)) and
logs ``bronze.retention_gap``. Failing forever on records Kafka no longer
has would stall bronze without bringing them back.

Each run also records the speed layer's watermark per view, read just
before it fixes its end (``speed_watermarks`` in the commit metadata):
publish never moves a boundary past it (:mod:`batch_layer.publish`).

A quiet run (nothing new) appends an empty commit carrying the same run
number and range with a newer ``as_of``. It has no transaction id, so it
may land after a concurrent run's newer append: the recorded run is
therefore the *highest* run number in the history, never simply the
latest commit's, and ``as_of`` the latest recorded. The first run of a
pipeline whose topic holds nothing yet commits run 1 over its empty range:
the table exists for the steps after it from the first run on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from batch_layer.tables import BRONZE_PROPERTIES, creation_options, ensure_table_properties
from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import read_suppressions
from layout import read_watermarks
from pipelines import PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "BronzeRun",
    "bronze_as_of",
    "bronze_path",
    "bronze_state",
    "committed_range",
    "earliest_offsets",
    "ingest_bronze",
    "resume_offsets",
    "speed_watermarks",
    "speed_watermarks_at",
    "stable_end",
]

_log = get_logger(__name__)

_SKIP_EMPTY_COMMITS = "spark.databricks.delta.skipRecordingEmptyCommits"


@dataclass(frozen=True)
class BronzeRun:
    """What one run appended."""

    path: str
    run: int
    start: dict[int, int]
    end: dict[int, int]
    rows: int
    skipped: bool
    """True when there was nothing new, or an identical run had already committed."""
    gap: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Per partition, the offsets [from, to) retention deleted before any run read them."""


def bronze_path(settings: Settings, spec: PipelineSpec) -> str:
    return f"{settings.lake.root.rstrip('/')}/bronze/{spec.table_name(settings)}"


def _app_id(settings: Settings, spec: PipelineSpec) -> str:
    return f"bronze:{spec.topic_of(settings)}"


def _metas(spark: SparkSession, path: str) -> list[dict]:
    """The metadata of every bronze commit that recorded a run, oldest first."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return []
    rows = (
        DeltaTable.forPath(spark, path)
        .history()
        .where("userMetadata IS NOT NULL")
        .orderBy("version")
        .select("userMetadata")
        .collect()
    )
    return [meta for meta in (json.loads(r.userMetadata) for r in rows) if "run" in meta]


def committed_range(spark: SparkSession, path: str) -> tuple[int, dict[int, int]]:
    """The highest run number committed and its end offsets (0, {} for a new table).

    The highest, not the latest commit's: a quiet run's empty commit of run
    ``N`` may land after a racing run committed ``N + 1``.
    """
    metas = _metas(spark, path)
    if not metas:
        return 0, {}
    meta = max(metas, key=lambda m: int(m["run"]))
    return int(meta["run"]), {int(p): int(o) for p, o in meta["end"].items()}


def bronze_as_of(spark: SparkSession, path: str) -> datetime | None:
    """When a committed run last fixed its stable end: bronze holds the log up to then."""
    times = [datetime.fromisoformat(m["as_of"]) for m in _metas(spark, path) if "as_of" in m]
    return max(times, default=None)


def bronze_state(spark: SparkSession, path: str) -> tuple[int, dict[int, int], datetime | None]:
    """:func:`committed_range` and :func:`bronze_as_of` from one read of the history."""
    metas = _metas(spark, path)
    if not metas:
        return 0, {}, None
    meta = max(metas, key=lambda m: int(m["run"]))
    times = [datetime.fromisoformat(m["as_of"]) for m in metas if "as_of" in m]
    end = {int(p): int(o) for p, o in meta["end"].items()}
    return int(meta["run"]), end, max(times, default=None)


def speed_watermarks_at(metas: list[dict], as_of: datetime) -> dict[str, datetime]:
    """The speed watermarks recorded by the newest run that fixed its end at or before ``as_of``.

    A run reads them before fixing its end, so every record past that end
    reaches the speed layer when its watermark is at least these (it only
    moves forward). A run recorded before bronze kept them gives ``{}``.

    >>> at = lambda h, m: datetime(2024, 5, 1, h, m, tzinfo=UTC).isoformat()
    >>> metas = [
    ...     {"run": 1, "as_of": at(10, 0), "speed_watermarks": {"clicks": at(9, 50)}},
    ...     {"run": 2, "as_of": at(10, 30), "speed_watermarks": {"clicks": at(10, 18)}},
    ... ]
    >>> speed_watermarks_at(metas, datetime.fromisoformat(at(10, 30)))["clicks"].isoformat()
    '2024-05-01T10:18:00+00:00'
    >>> speed_watermarks_at(metas, datetime.fromisoformat(at(10, 29)))["clicks"].isoformat()
    '2024-05-01T09:50:00+00:00'
    >>> speed_watermarks_at([{"run": 1, "as_of": at(10, 0)}], datetime.fromisoformat(at(11, 0)))
    {}
    """
    runs = [m for m in metas if "as_of" in m and datetime.fromisoformat(m["as_of"]) <= as_of]
    if not runs:
        return {}
    newest = max(runs, key=lambda m: datetime.fromisoformat(m["as_of"]))
    return {
        view: datetime.fromisoformat(at) for view, at in newest.get("speed_watermarks", {}).items()
    }


def speed_watermarks(spark: SparkSession, path: str, as_of: datetime) -> dict[str, datetime]:
    """Per view, the speed layer's watermark when bronze fixed the end ``as_of`` stands for
    (:func:`speed_watermarks_at`); views without a speed layer are left out."""
    return speed_watermarks_at(_metas(spark, path), as_of)


def _watermarks(settings: Settings, topic: str, timeout_s: float) -> dict[int, tuple[int, int]]:
    """Each partition's (low, high) watermark now."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    electing = {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    }

    consumer = Consumer(settings.kafka.client_config() | {"group.id": f"bronze-probe-{topic}"})
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics[topic]
        if metadata.error is not None:
            raise RuntimeError(f"Topic {topic!r} is not readable: {metadata.error}")
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
                    for p in sorted(metadata.partitions)
                }
            except KafkaException as error:  # a new topic's leaders are still being elected
                code = error.args[0].code()
                if code not in electing or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()


def stable_end(settings: Settings, topic: str, timeout_s: float = 30) -> dict[int, int]:
    """Each partition's high watermark now: the fixed end of this run's range."""
    return {p: high for p, (_, high) in _watermarks(settings, topic, timeout_s).items()}


def earliest_offsets(settings: Settings, topic: str, timeout_s: float = 30) -> dict[int, int]:
    """Each partition's low watermark now: the oldest offset retention has kept."""
    return {p: low for p, (low, _) in _watermarks(settings, topic, timeout_s).items()}


def resume_offsets(
    recorded: dict[int, int], earliest: dict[int, int], end: dict[int, int]
) -> tuple[dict[int, int], dict[int, tuple[int, int]]]:
    """(where each partition of ``end`` resumes, the gaps retention left before it).

    A partition resumes at its recorded end (0 when never read), or at its
    earliest available offset when retention deleted records past that end.

    >>> resume_offsets({0: 40}, {0: 0, 1: 25}, {0: 50, 1: 30})
    ({0: 40, 1: 25}, {1: (0, 25)})
    """
    start, gap = {}, {}
    for p in end:
        wanted, kept = recorded.get(p, 0), earliest.get(p, 0)
        start[p] = max(wanted, kept)
        if kept > wanted:
            gap[p] = (wanted, kept)
    return start, gap


def ingest_bronze(spark: SparkSession, settings: Settings, spec: PipelineSpec) -> BronzeRun:
    """Append the next offset range of the pipeline's topic to bronze, exactly once.

    The run's ``as_of`` (when the stable end was fixed) is recorded with the
    range: every record Kafka held at that moment is in bronze after the run.
    So are the speed layer's watermarks read just before
    (:func:`speed_watermarks`), which publish never moves a boundary past.
    A run with nothing new records a new ``as_of`` too (an empty commit), so
    the boundary can move while the site is quiet.
    """
    from pyspark.sql import functions as F

    from batch_layer.suppressed import without_suppressed

    path = bronze_path(settings, spec)
    topic = spec.topic_of(settings)
    run, recorded = committed_range(spark, path)
    speed = read_watermarks(settings.cassandra, spec.views)  # before the end is fixed
    as_of = datetime.now(UTC)
    end = stable_end(settings, topic)
    start, gap = resume_offsets(recorded, earliest_offsets(settings, topic), end)
    if gap:
        _log_gap(path, topic, gap)
    base = {
        "topic": topic,
        "start": start,
        "end": end,
        "speed_watermarks": {view: at.isoformat() for view, at in speed.items()},
    } | ({"gap": gap} if gap else {})
    if run > 0 and all(start[p] >= end[p] for p in end):
        _touch(spark, path, base | {"run": run}, as_of)
        log_event(_log, "bronze.up_to_date", path=path, end=end, as_of=as_of.isoformat())
        return BronzeRun(path, run, start, end, 0, skipped=True, gap=gap)
    # A first run appends its range even when the topic holds nothing yet (a pipeline
    # declared before its service sends): the table exists for the steps after it, and its
    # as_of moves the boundary as a quiet run's does.
    raw = (
        spark.read.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", json.dumps({topic: {str(p): o for p, o in start.items()}}))
        .option("endingOffsets", json.dumps({topic: {str(p): o for p, o in end.items()}}))
        .option("failOnDataLoss", "true")
        .load()
        .select(
            "key",
            "value",
            "headers",
            "topic",
            "partition",
            "offset",
            F.col("timestamp").alias("kafka_timestamp"),
            F.current_date().alias("ingest_date"),
        )
    )
    forgotten = read_suppressions(settings.kafka).of(spec.name)
    raw = without_suppressed(raw, forgotten, spec.identity)
    meta = base | {"run": run + 1, "as_of": as_of.isoformat()}
    user_metadata = json.dumps(meta)
    with _empty_commits_recorded(spark):  # the range is recorded even if all was suppressed
        (
            raw.write.format("delta")
            .mode("append")
            .partitionBy("ingest_date")
            .option("txnAppId", _app_id(settings, spec))
            .option("txnVersion", run + 1)
            .option("userMetadata", user_metadata)
            .options(**creation_options(settings, BRONZE_PROPERTIES))
            .save(path)
        )
    rows = _written_rows(spark, path, user_metadata)
    committed = rows is not None
    ensure_table_properties(spark, settings, path, extra=BRONZE_PROPERTIES)
    log_event(
        _log,
        "bronze.appended" if committed else "bronze.already_committed",
        path=path,
        run=run + 1,
        start=start,
        end=end,
    )
    return BronzeRun(path, run + 1, start, end, rows or 0, skipped=not committed, gap=gap)


def _log_gap(path: str, topic: str, gap: dict[int, tuple[int, int]]) -> None:
    log_event(
        _log,
        "bronze.retention_gap",
        level=logging.WARNING,
        path=path,
        topic=topic,
        gap={p: list(r) for p, r in gap.items()},
        lost=sum(to - first for first, to in gap.values()),
        why="Kafka's retention deleted these records before bronze read them; bronze starts "
        "after them. Raise the topic's retention.ms or run bronze more often.",
    )


def _touch(spark: SparkSession, path: str, meta: dict, as_of: datetime) -> None:
    """Record a newer ``as_of`` for the same range: an empty append carrying the metadata."""
    meta = meta | {"as_of": as_of.isoformat()}
    empty = spark.read.format("delta").load(path).limit(0)
    with _empty_commits_recorded(spark):
        empty.write.format("delta").mode("append").option("userMetadata", json.dumps(meta)).save(
            path
        )


@contextmanager
def _empty_commits_recorded(spark: SparkSession) -> Iterator[None]:
    """Delta records the block's writes even when they add no rows.

    Delta skips empty commits unless told otherwise
    (``spark.databricks.delta.skipRecordingEmptyCommits``): a quiet run's
    touch, or a range holding only suppressed users' records, must still
    record its range and ``as_of``.
    """
    previous = spark.conf.get(_SKIP_EMPTY_COMMITS, None)
    spark.conf.set(_SKIP_EMPTY_COMMITS, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(_SKIP_EMPTY_COMMITS)
        else:
            spark.conf.set(_SKIP_EMPTY_COMMITS, previous)


def _written_rows(spark: SparkSession, path: str, user_metadata: str) -> int | None:
    """Rows of the write that carried ``user_metadata``; None when Delta skipped it.

    Found by its metadata, not by version: a racing quiet run may commit
    just before or after it, and auto-compaction may follow it.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    history = DeltaTable.forPath(spark, path).history()
    first = (
        history.where((F.col("operation") == "WRITE") & (F.col("userMetadata") == user_metadata))
        .orderBy("version")
        .limit(1)
        .collect()
    )
    if not first:
        return None
    return int((first[0].operationMetrics or {}).get("numOutputRows", 0))
