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
from typing import TYPE_CHECKING

from core.cassandra import execute_all, process_session, view_row_values
from core.settings import CassandraSettings
from layout import ViewTables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

__all__ = ["CassandraViewSink", "write_rows"]


def write_rows(
    rows: Iterable[Row],
    tables: ViewTables,
    cassandra: CassandraSettings,
    batch_id: int,
    concurrency: int = 64,
) -> int:
    """Upsert view rows into both tables of a view; return how many rows were written."""
    session = process_session(cassandra)
    by_key = session.prepare(tables.insert_by_key())
    by_minute = session.prepare(tables.insert_by_minute())
    measures = [m.name for m in tables.spec.measures]
    written_at = datetime.now(UTC)
    key_rows, minute_rows = [], []
    for row in rows:
        start, key_values, values = view_row_values(row, tables.spec.keys, measures)
        by_key_row, by_minute_row = tables.bind(
            start, key_values, values, written_by=(batch_id, written_at)
        )
        key_rows.append(by_key_row)
        minute_rows.append(by_minute_row)
    execute_all(session, by_key, key_rows, concurrency)
    execute_all(session, by_minute, minute_rows, concurrency)
    return len(key_rows)


class CassandraViewSink:
    """The ``foreachBatch`` function of one view's streaming query."""

    def __init__(self, tables: ViewTables, cassandra: CassandraSettings) -> None:
        self.tables = tables
        self.cassandra = cassandra

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        tables, cassandra = self.tables, self.cassandra

        def write_partition(rows: Iterator[Row]) -> None:
            write_rows(rows, tables, cassandra, batch_id)

        batch.foreachPartition(write_partition)
