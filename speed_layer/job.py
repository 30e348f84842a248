"""The speed layer: Kafka -> parse -> dedupe -> every view -> Cassandra, continuously.

Three named steps, as in the rest of the platform:

1. :func:`read_events` - the events topic as a stream, parsed with the
   contract's schema; event time is the collector's skew-corrected
   ``timestamp``; a watermark bounds lateness and ``event_id`` duplicates
   within it are dropped (RocksDB state).
2. the view functions of :mod:`views`, unchanged;
3. :func:`start_queries` - one update-mode query per view whose
   ``foreachBatch`` upserts absolute values (:mod:`speed_layer.sink`).

:class:`ProgressRecorder` writes each query's progress (batch, newest event
time, watermark, rates, Kafka lag, late rows dropped) to Cassandra, where
``status`` and the serving layer read freshness.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.log import get_logger, log_event
from core.settings import Settings
from speed_layer.schema import PROGRESS_TABLE, SpeedTables, create_statements
from speed_layer.sink import CassandraViewSink
from views import VIEWS, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = [
    "ProgressRecorder",
    "create_tables",
    "parse_events",
    "query_name",
    "read_events",
    "start_queries",
]

_log = get_logger(__name__)


def query_name(spec: ViewSpec) -> str:
    return f"speed_{spec.name}"


def create_tables(settings: Settings) -> None:
    """Create the speed tables (idempotent); part of ``platformctl up``."""
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    try:
        for statement in create_statements(settings.cassandra.keyspace, settings.speed.ttl_s):
            session.execute(statement)
    finally:
        cluster.shutdown()


def parse_events(raw: DataFrame) -> DataFrame:
    """Kafka records -> contract-typed events with ``event_time`` (batch or stream)."""
    from pyspark.sql import functions as F

    from data_contracts import load_contract
    from data_contracts.derive import to_spark_schema

    schema = to_spark_schema(load_contract("web_events", 1))
    return (
        raw.select(F.from_json(F.col("value").cast("string"), schema).alias("e"))
        .select("e.*")
        .where(F.col("event_id").isNotNull() & F.col("timestamp").isNotNull())
        .withColumn("event_time", F.col("timestamp"))
    )


def read_events(spark: SparkSession, settings: Settings) -> DataFrame:
    """The deduplicated, watermarked stream of events every view reads."""
    raw = (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic)
        .option("startingOffsets", settings.speed.starting_offsets)
        .option("maxOffsetsPerTrigger", settings.speed.max_offsets_per_trigger)
        .option("failOnDataLoss", "false")
        .load()
    )
    return (
        parse_events(raw)
        .withWatermark("event_time", settings.speed.watermark)
        .dropDuplicatesWithinWatermark(["event_id"])
    )


def start_queries(
    spark: SparkSession,
    settings: Settings,
    *,
    views: tuple[ViewSpec, ...] = VIEWS,
    available_now: bool = False,
) -> list[StreamingQuery]:
    """Start one streaming query per view; ``available_now`` drains the log and stops."""
    events = read_events(spark, settings)
    root = f"{settings.lake.checkpoint_root.rstrip('/')}/{settings.speed.checkpoint_name}"
    queries = []
    for spec in views:
        tables = SpeedTables(spec, settings.cassandra.keyspace)
        writer = (
            spec.build(events)
            .writeStream.queryName(query_name(spec))
            .outputMode("update")
            .foreachBatch(CassandraViewSink(tables, settings.cassandra))
            .option("checkpointLocation", f"{root}/{spec.name}")
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime=settings.speed.trigger)
        )
        queries.append(writer.start())
        log_event(_log, "speed.query_started", view=spec.name, checkpoint=f"{root}/{spec.name}")
    return queries


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


class ProgressRecorder:
    """Record each micro-batch's progress in ``speed_progress`` (driver side)."""

    def __init__(self, settings: Settings) -> None:
        from core.cassandra import connect

        self._cluster, self._session = connect(settings.cassandra)
        table = f"{settings.cassandra.keyspace}.{PROGRESS_TABLE}"
        self._batch = self._session.prepare(
            f"INSERT INTO {table} (view_name, batch_id, max_event_time, watermark, written_at, "
            "heartbeat_at, input_rows, input_rows_per_s, processed_rows_per_s, "
            "late_rows_dropped, kafka_lag, batch_duration_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        )
        # Late rows dropped are cumulative across batches and restarts.
        self._late: dict[str, int] = {
            row.view_name: row.late_rows_dropped or 0
            for row in self._session.execute(f"SELECT view_name, late_rows_dropped FROM {table}")
        }
        self._touch = self._session.prepare(
            f"UPDATE {table} SET heartbeat_at = ? WHERE view_name = ?"
        )
        self._heartbeat = self._session.prepare(
            f"UPDATE {table} SET heartbeat_at = ?, kafka_lag = ?, watermark = ? WHERE view_name = ?"
        )

    def listener(self) -> Any:
        from pyspark.sql.streaming import StreamingQueryListener

        recorder = self

        names: dict[str, str] = {}

        class _Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                names[str(event.id)] = event.name or ""

            def onQueryProgress(self, event: Any) -> None:
                recorder.record(event.progress)

            def onQueryIdle(self, event: Any) -> None:
                recorder.heartbeat(names.get(str(event.id), ""))

            def onQueryTerminated(self, event: Any) -> None:
                log_event(_log, "speed.query_terminated", id=str(event.id), error=event.exception)

        return _Listener()

    def record(self, progress: Any) -> None:
        name = progress.name or ""
        if not name.startswith("speed_"):
            return
        view = name.removeprefix("speed_")
        event_time = progress.eventTime or {}
        lag = None
        for source in progress.sources:
            behind = (source.metrics or {}).get("maxOffsetsBehindLatest")
            lag = int(behind) if behind is not None else lag
        now = datetime.now(UTC)
        watermark = _ts(event_time.get("watermark"))
        if progress.numInputRows:
            late = self._late.get(view, 0) + sum(
                op.numRowsDroppedByWatermark for op in progress.stateOperators
            )
            self._late[view] = late
            self._session.execute(
                self._batch,
                (
                    view,
                    progress.batchId,
                    _ts(event_time.get("max")),
                    watermark,
                    now,
                    now,
                    progress.numInputRows,
                    progress.inputRowsPerSecond,
                    progress.processedRowsPerSecond,
                    late,
                    lag,
                    int(progress.batchDuration),
                ),
            )
        else:
            self._session.execute(self._heartbeat, (now, lag, watermark, view))

    def heartbeat(self, name: str) -> None:
        """An idle query is alive: refresh its heartbeat only."""
        if name.startswith("speed_"):
            self._session.execute(self._touch, (datetime.now(UTC), name.removeprefix("speed_")))

    def close(self) -> None:
        self._cluster.shutdown()
