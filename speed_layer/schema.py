"""Cassandra tables for the speed views, derived from the view specs.

Designed per query, so that a serving read is one partition slice:

- ``speed_<view>``: one partition per (keys, UTC day), rows clustered by
  ``window_start`` descending: a timeseries of one key over a range reads
  one partition per day, newest first.
- ``speed_<view>_by_minute``: one partition per minute window, one row per
  key: "top N right now" reads one partition.
- ``speed_progress``: per view, the last micro-batch written, the newest
  event time it reflected and when, so freshness is a single-row read.

Speed rows expire after ``ttl_s`` (longer than the batch layer's delay): by
then the batch view has replaced them. Rows are written as absolute values
(upserts), never counter increments, so a replayed micro-batch rewrites them.
"""

from __future__ import annotations

from dataclasses import dataclass

from views import VIEWS, ViewSpec
from views.kinds import kind

__all__ = [
    "PROGRESS_TABLE",
    "SpeedTables",
    "create_statements",
    "missing_columns",
    "speed_tables",
]

PROGRESS_TABLE = "speed_progress"


@dataclass(frozen=True)
class SpeedTables:
    """The two tables of one view and the statements to write them."""

    spec: ViewSpec
    keyspace: str

    @property
    def by_key(self) -> str:
        return f"{self.keyspace}.speed_{self.spec.name}"

    @property
    def by_minute(self) -> str:
        return f"{self.keyspace}.speed_{self.spec.name}_by_minute"

    def _measures(self) -> str:
        return ", ".join(f"{m.name} {kind(m.kind).cql_type}" for m in self.spec.measures)

    def create(self, ttl_s: int) -> list[str]:
        keys = ", ".join(f"{k} text" for k in self.spec.keys)
        key_list = ", ".join(self.spec.keys)
        options = (
            f"default_time_to_live = {ttl_s} AND compaction = "
            "{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'DAYS', "
            "'compaction_window_size': 1}"
        )
        return [
            f"CREATE TABLE IF NOT EXISTS {self.by_key} ({keys}, day date, "
            f"window_start timestamp, {self._measures()}, batch_id bigint, "
            f"written_at timestamp, PRIMARY KEY (({key_list}, day), window_start)) "
            f"WITH CLUSTERING ORDER BY (window_start DESC) AND {options}",
            f"CREATE TABLE IF NOT EXISTS {self.by_minute} (window_start timestamp, {keys}, "
            f"{self._measures()}, batch_id bigint, written_at timestamp, "
            f"PRIMARY KEY ((window_start), {key_list})) WITH {options}",
        ]

    def insert_by_key(self) -> str:
        columns = [*self.spec.keys, "day", "window_start", *self._names(), "batch_id", "written_at"]
        return self._insert(self.by_key, columns)

    def insert_by_minute(self) -> str:
        columns = ["window_start", *self.spec.keys, *self._names(), "batch_id", "written_at"]
        return self._insert(self.by_minute, columns)

    def _names(self) -> list[str]:
        return [m.name for m in self.spec.measures]

    @staticmethod
    def _insert(table: str, columns: list[str]) -> str:
        marks = ", ".join("?" for _ in columns)
        return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


def speed_tables(keyspace: str) -> list[SpeedTables]:
    """The tables of every registered view."""
    return [SpeedTables(spec, keyspace) for spec in VIEWS]


_PROGRESS_COLUMNS = {
    "batch_id": "bigint",
    "max_event_time": "timestamp",
    "watermark": "timestamp",
    "written_at": "timestamp",
    "heartbeat_at": "timestamp",
    "stopped_at": "timestamp",
    "input_rows": "bigint",
    "input_rows_per_s": "double",
    "processed_rows_per_s": "double",
    "late_rows_dropped": "bigint",
    "future_rows_dropped": "bigint",
    "before_floor_rows": "bigint",
    "rejected_rows": "map<text, bigint>",
    "kafka_lag": "bigint",
    "batch_duration_ms": "bigint",
    "run_generation": "int",
}
"""``speed_progress``, per view: the last micro-batch, the newest event time and watermark,
rates, cumulative rows dropped (late, future, before the run's floor) and rejected (per reason
of :data:`views.input.REJECT_REASONS`), the run it belongs to."""


def create_statements(keyspace: str, ttl_s: int) -> list[str]:
    """Every CREATE TABLE of the speed layer (idempotent)."""
    from speed_layer.start import runs_table_statement

    statements = [s for tables in speed_tables(keyspace) for s in tables.create(ttl_s)]
    columns = ", ".join(f"{name} {kind}" for name, kind in _PROGRESS_COLUMNS.items())
    statements.append(
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{PROGRESS_TABLE} "
        f"(view_name text PRIMARY KEY, {columns})"
    )
    statements.append(runs_table_statement(keyspace))
    return statements


def missing_columns(session, keyspace: str) -> list[str]:
    """ALTER TABLE statements adding progress columns a table of an older version lacks."""
    present = {
        row.column_name
        for row in session.execute(
            "SELECT column_name FROM system_schema.columns "
            "WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, PROGRESS_TABLE),
        )
    }
    return [
        f"ALTER TABLE {keyspace}.{PROGRESS_TABLE} ADD {name} {kind}"
        for name, kind in _PROGRESS_COLUMNS.items()
        if name not in present
    ]
