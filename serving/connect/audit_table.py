"""The audit table: the audit topic's records, landed in Delta by the SQL server.

Serving and the SQL server write one record per read to ``kafka.audit_topic``
(:mod:`access.audit`). At each catalog refresh the SQL server appends the
records it has not landed yet to ``<lake>/_platform/audit`` (partitioned by
``day``), which analysts of the admins' team query as ``audit_log``
(:mod:`serving.connect.grants`); nobody else sees it.

- **Nothing twice.** Each row keeps its Kafka partition and offset. A landing
  starts after the highest offset the table holds per partition and is an
  idempotent Delta write (``txnAppId``/``txnVersion``: the end offsets), so a
  retry, or two servers landing the same records, add them once.
- **Nothing to do costs nothing.** The topic's offsets are asked of Kafka
  (no Spark job) and compared with those landed last: a refresh with no new
  record runs no Spark job.
- **Kept as long as the settings say.** Rows older than
  ``access.audit_retention_days`` are deleted, and the day partitions
  compacted, at most once a day (the time of the last run is kept in the
  server's state folder).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from access.audit import AUDIT_FIELDS
from core.log import get_logger, log_event
from serving.connect.catalog import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from core.settings import Settings

__all__ = ["AUDIT_COLUMNS", "AUDIT_VIEW", "AuditTable", "audit_path"]

_log = get_logger(__name__)

AUDIT_VIEW = "audit_log"
AUDIT_COLUMNS = (
    "service string, identity string, teams array<string>, source string, action string, "
    "outcome string, reason string, views array<string>, rows bigint, duration_ms double, "
    "statement string, at_ms bigint, kafka_partition int, kafka_offset bigint"
)
"""The table's columns (Spark DDL), ``day`` (its partition) aside: an audit record's
fields (:data:`access.audit.AUDIT_FIELDS`), then where it was on the topic."""
_SHOWN = (
    "service, identity, teams, source, action, outcome, reason, views, rows, duration_ms, "
    "statement, timestamp_millis(at_ms) AS at"
)
_MAX_RECORDS = 100_000
"""Most records landed by one refresh (the rest by the next ones)."""
_APP_ID = "platform-audit-landing"
_DAY_S = 24 * 3600


def audit_path(settings: Settings) -> str:
    """``<lake>/_platform/audit``."""
    return f"{settings.lake.root.rstrip('/')}/_platform/audit"


class AuditTable:
    """The audit table at :func:`audit_path`, landed from ``kafka.audit_topic``."""

    def __init__(self, settings: Settings, state_dir: Path) -> None:
        self.settings = settings
        self.path = audit_path(settings)
        self.topic = settings.kafka.audit_topic
        self.landed = 0
        """Records landed by this process."""
        self._next: dict[int, int] | None = None
        """Per partition, the offset after the last one landed (as last seen)."""
        self._consumer: Any = None
        self._maintained = state_dir / "audit-maintained-at"

    # --- the catalog's view -------------------------------------------------------------------

    def view_sql(self) -> str:
        """``audit_log`` on the table (its current version at every query)."""
        table = f"delta.{quote(self.path)}"
        return f"CREATE OR REPLACE VIEW {AUDIT_VIEW} AS SELECT {_SHOWN} FROM {table}"

    def ensure(self, spark: SparkSession) -> None:
        """The empty table, when there is none yet (so ``audit_log`` always reads it)."""
        from layout.lake import table_version

        if table_version(spark, self.path) is not None:
            return
        empty = spark.sql("SELECT * FROM VALUES (1) WHERE false").selectExpr(*_nulls())
        empty.selectExpr("*", "CAST(NULL AS DATE) AS day").write.format("delta").mode(
            "append"
        ).partitionBy("day").save(self.path)

    # --- landing ------------------------------------------------------------------------------

    def land(self, spark: SparkSession) -> int:
        """Append the topic's records not landed yet; how many. No Spark job when none."""
        ranges, known = self._offsets(), self._next or {}
        if all(high <= max(low, known.get(p, -1)) for p, (low, high) in ranges.items()):
            self._next = {p: high for p, (_, high) in ranges.items()}
            return 0  # nothing new since the last landing (or an empty topic)
        landed = self._landed(spark)
        start = {p: max(low, landed.get(p, low)) for p, (low, _) in ranges.items()}
        end = {p: high for p, (_, high) in ranges.items()}
        rows = self._read(start, end) if any(start[p] < end[p] for p in ranges) else []
        after = _after(rows, start)
        if rows:
            # The end offsets are the write's version: a retry of the same records, or another
            # server landing them first, makes it a write Delta skips.
            self._append(spark, rows, version=sum(after.values()))
            self.landed += len(rows)
            log_event(_log, "sql.audit.landed", records=len(rows), table=self.path)
        self._next = after
        return len(rows)

    def _offsets(self) -> dict[int, tuple[int, int]]:
        """Per partition of the topic, its (low, high) watermarks; {} when there is no topic."""
        from confluent_kafka import TopicPartition

        consumer = self._client()
        metadata = consumer.list_topics(self.topic, timeout=10).topics.get(self.topic)
        if metadata is None or metadata.error is not None:
            return {}
        return {
            p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10)
            for p in sorted(metadata.partitions)
        }

    def _landed(self, spark: SparkSession) -> dict[int, int]:
        """Per partition, the offset after the highest one the table holds (a Spark job)."""
        from layout.lake import table_version

        if table_version(spark, self.path) is None:
            return {}
        rows = (
            spark.read.format("delta")
            .load(self.path)
            .groupBy("kafka_partition")
            .agg({"kafka_offset": "max"})
            .collect()
        )
        return {int(r[0]): int(r[1]) + 1 for r in rows if r[0] is not None}

    def _read(self, start: dict[int, int], end: dict[int, int]) -> list[dict[str, Any]]:
        """The records from ``start`` to ``end`` (per partition), at most :data:`_MAX_RECORDS`."""
        from confluent_kafka import TopicPartition

        consumer = self._client()
        wanted = {p: (start[p], end[p]) for p in start if start[p] < end[p]}
        consumer.assign([TopicPartition(self.topic, p, lo) for p, (lo, _) in wanted.items()])
        rows: list[dict[str, Any]] = []
        done: set[int] = set()
        deadline = time.monotonic() + 20
        try:
            while len(done) < len(wanted) and len(rows) < _MAX_RECORDS:
                if time.monotonic() > deadline:
                    break
                for message in consumer.consume(num_messages=1000, timeout=1.0):
                    if message.error() is not None:
                        continue
                    p, offset = message.partition(), message.offset()
                    if p in done or offset >= wanted[p][1]:
                        done.add(p)
                        continue
                    rows.append(_row(message.value(), p, offset))
                    if offset + 1 >= wanted[p][1]:
                        done.add(p)
        finally:
            consumer.unassign()
        return rows

    def _append(self, spark: SparkSession, rows: list[dict[str, Any]], version: int) -> None:
        import pyarrow as pa

        # An Arrow table reaches the JVM as Arrow batches: no Python worker, no pandas types.
        table = pa.Table.from_pylist(rows, schema=_arrow_schema(pa))
        (
            spark.createDataFrame(table)
            .selectExpr("*", "to_date(timestamp_millis(at_ms)) AS day")
            .write.format("delta")
            .mode("append")
            .partitionBy("day")
            .option("txnAppId", _APP_ID)
            .option("txnVersion", version)
            .save(self.path)
        )

    def _client(self) -> Any:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(
                self.settings.kafka.client_config()
                | {
                    "group.id": "platform-sql-audit-landing",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                }
            )
        return self._consumer

    # --- retention ----------------------------------------------------------------------------

    def maintain(self, spark: SparkSession, now: float | None = None) -> bool:
        """Rows older than ``access.audit_retention_days`` deleted and the older days'
        files compacted, if not done in the last day; whether it ran."""
        from layout.lake import table_version

        now = time.time() if now is None else now
        if now - self._last_maintained() < _DAY_S or table_version(spark, self.path) is None:
            return False
        days = self.settings.access.audit_retention_days
        cutoff = (datetime.fromtimestamp(now, UTC) - timedelta(days=days)).date().isoformat()
        table = f"delta.{quote(self.path)}"
        spark.sql(f"DELETE FROM {table} WHERE day < DATE'{cutoff}'")
        spark.sql(f"OPTIMIZE {table} WHERE day < current_date()")
        self._maintained.parent.mkdir(parents=True, exist_ok=True)
        self._maintained.write_text(str(now))
        log_event(_log, "sql.audit.maintained", table=self.path, deleted_before=cutoff)
        return True

    def _last_maintained(self) -> float:
        try:
            return float(self._maintained.read_text())
        except (OSError, ValueError):
            return 0.0

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


_ARROW = {
    "string": lambda pa: pa.string(),
    "array<string>": lambda pa: pa.list_(pa.string()),
    "bigint": lambda pa: pa.int64(),
    "int": lambda pa: pa.int32(),
    "double": lambda pa: pa.float64(),
}


def _arrow_schema(pa: Any) -> Any:
    """:data:`AUDIT_COLUMNS` as an Arrow schema."""
    columns = (column.split(" ", 1) for column in AUDIT_COLUMNS.split(", "))
    return pa.schema([pa.field(name, _ARROW[kind](pa)) for name, kind in columns])


def _nulls() -> list[str]:
    """``CAST(NULL AS <type>) AS <name>`` for each column of the table."""
    return [
        f"CAST(NULL AS {kind}) AS {name}"
        for name, kind in (column.split(" ", 1) for column in AUDIT_COLUMNS.split(", "))
    ]


def _row(value: bytes | None, partition: int, offset: int) -> dict[str, Any]:
    """One record of the topic as a row (a record that is not one: its coordinates only)."""
    try:
        record = orjson.loads(value or b"{}")
    except orjson.JSONDecodeError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    row = {name: record.get(name) for name in AUDIT_FIELDS}
    row["teams"] = [str(t) for t in row["teams"] or ()]
    row["views"] = [str(v) for v in row["views"] or ()]
    row["duration_ms"] = float(row["duration_ms"] or 0.0)
    row["at_ms"] = int(row["at_ms"] or 0)
    return row | {"kafka_partition": partition, "kafka_offset": offset}


def _after(rows: list[dict[str, Any]], start: dict[int, int]) -> dict[int, int]:
    """Per partition, the offset after the last of ``rows`` (``start`` where none)."""
    after = dict(start)
    for row in rows:
        p = row["kafka_partition"]
        after[p] = max(after.get(p, 0), row["kafka_offset"] + 1)
    return after
