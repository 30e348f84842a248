"""Write a micro-batch of view rows to Cassandra as idempotent upserts, on the executors.

``foreachBatch`` hands each micro-batch's updated rows here. Every row is an
*absolute* value for its (view, key, window): the streaming aggregation's
current state, not an increment. So a replayed micro-batch (after a crash
between the write and the checkpoint commit) rewrites the same rows with the
same values, and the effect is exactly once.

The rows never travel to the driver: ``foreachPartition`` runs on the
executors, each of which keeps one Cassandra session per Python worker
process (Spark reuses its Python workers) and writes its partition with
prepared statements, many in flight at once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.settings import CassandraSettings
from speed_layer.schema import SpeedTables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

__all__ = ["CassandraViewSink", "write_rows"]

_SESSIONS: dict[str, Any] = {}
"""One Cassandra session per executor Python process, keyed by its settings."""


def _session(cassandra: CassandraSettings) -> Any:
    key = cassandra.model_dump_json()
    if key not in _SESSIONS:
        from core.cassandra import connect

        _SESSIONS[key] = connect(cassandra)[1]
    return _SESSIONS[key]


def _plain(value: Any) -> Any:
    # Spark hands binary columns to Python as bytearray; the driver wants bytes.
    return bytes(value) if isinstance(value, bytearray) else value


def write_rows(
    rows: Iterable[Row],
    tables: SpeedTables,
    cassandra: CassandraSettings,
    batch_id: int,
    concurrency: int = 64,
) -> int:
    """Upsert view rows into both tables of a view; return how many rows were written."""
    from cassandra.concurrent import execute_concurrent_with_args

    session = _session(cassandra)
    by_key = session.prepare(tables.insert_by_key())
    by_minute = session.prepare(tables.insert_by_minute())
    keys = tables.spec.keys
    measures = [m.name for m in tables.spec.measures]
    written_at = datetime.now(UTC)
    key_rows, minute_rows = [], []
    for row in rows:
        start = row["window_start"]
        if start.tzinfo is None:  # PySpark returns naive datetimes in the process's local time
            start = start.astimezone(UTC)
        key_values = [row[k] for k in keys]
        values = [_plain(row[m]) for m in measures]
        key_rows.append((*key_values, start.date(), start, *values, batch_id, written_at))
        minute_rows.append((start, *key_values, *values, batch_id, written_at))
    for statement, args in ((by_key, key_rows), (by_minute, minute_rows)):
        results = execute_concurrent_with_args(
            session, statement, args, concurrency=concurrency, raise_on_first_error=True
        )
        for ok, result in results:
            if not ok:
                raise result
    return len(key_rows)


class CassandraViewSink:
    """The ``foreachBatch`` function of one view's streaming query."""

    def __init__(self, tables: SpeedTables, cassandra: CassandraSettings) -> None:
        self.tables = tables
        self.cassandra = cassandra

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        tables, cassandra = self.tables, self.cassandra

        def write_partition(rows: Iterator[Row]) -> None:
            write_rows(rows, tables, cassandra, batch_id)

        batch.foreachPartition(write_partition)
