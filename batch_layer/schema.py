"""Cassandra tables holding the published batch views, derived from the view specs.

The batch layer loads each validated gold day into Cassandra as a new
*version* of that day, then flips one pointer. Serving never sees a half
loaded day:

- ``batch_<view>``: one partition per (keys, UTC day, version), rows
  clustered by ``window_start`` descending, the same shape as the speed
  table, so a timeseries read is one partition slice per day.
- ``batch_<view>_by_minute``: one partition per (minute window, version), one
  row per key: top-N over a range reads one partition per minute.
- ``batch_days``: per view and day, the version serving must read (the
  atomic switch: a publish writes the new version's rows first, then these
  pointers, then the boundary).
- ``batch_boundary``: per view, the end of the newest complete, validated
  period. Serving answers windows before it from the batch tables and
  windows at or after it from the speed tables.
- ``batch_superseded``: versions a newer publish replaced, and when; the
  maintenance DAG deletes their rows after a grace period.

Versions superseded by a newer publish are deleted by the maintenance DAG
once no reader can still hold the old pointer.
"""

from __future__ import annotations

from dataclasses import dataclass

from batch_layer.pipelines import PIPELINES, PipelineSpec
from core.settings import Settings
from views import ViewSpec
from views.kinds import kind

__all__ = [
    "BOUNDARY_TABLE",
    "DAYS_TABLE",
    "SUPERSEDED_TABLE",
    "BatchTables",
    "batch_tables",
    "create_statements",
    "create_tables",
]

BOUNDARY_TABLE = "batch_boundary"
DAYS_TABLE = "batch_days"
SUPERSEDED_TABLE = "batch_superseded"


@dataclass(frozen=True)
class BatchTables:
    """The two tables of one view's published batch rows and their statements."""

    spec: ViewSpec
    keyspace: str

    @property
    def by_key(self) -> str:
        return f"{self.keyspace}.batch_{self.spec.name}"

    @property
    def by_minute(self) -> str:
        return f"{self.keyspace}.batch_{self.spec.name}_by_minute"

    def _measures(self) -> str:
        return ", ".join(f"{m.name} {kind(m.kind).cql_type}" for m in self.spec.measures)

    def _names(self) -> list[str]:
        return [m.name for m in self.spec.measures]

    def create(self) -> list[str]:
        keys = ", ".join(f"{k} text" for k in self.spec.keys)
        key_list = ", ".join(self.spec.keys)
        return [
            f"CREATE TABLE IF NOT EXISTS {self.by_key} ({keys}, day date, version bigint, "
            f"window_start timestamp, {self._measures()}, "
            f"PRIMARY KEY (({key_list}, day, version), window_start)) "
            "WITH CLUSTERING ORDER BY (window_start DESC)",
            f"CREATE TABLE IF NOT EXISTS {self.by_minute} (window_start timestamp, "
            f"version bigint, {keys}, {self._measures()}, "
            f"PRIMARY KEY ((window_start, version), {key_list}))",
        ]

    def insert_by_key(self) -> str:
        columns = [*self.spec.keys, "day", "version", "window_start", *self._names()]
        return _insert(self.by_key, columns)

    def insert_by_minute(self) -> str:
        columns = ["window_start", "version", *self.spec.keys, *self._names()]
        return _insert(self.by_minute, columns)


def _insert(table: str, columns: list[str]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


def batch_tables(
    keyspace: str, pipelines: tuple[PipelineSpec, ...] = PIPELINES
) -> list[BatchTables]:
    """The batch tables of every view the pipelines publish."""
    return [BatchTables(view, keyspace) for spec in pipelines for view in spec.view_specs]


def create_statements(keyspace: str, pipelines: tuple[PipelineSpec, ...] = PIPELINES) -> list[str]:
    """Every CREATE TABLE of the published batch views (idempotent)."""
    statements = [s for tables in batch_tables(keyspace, pipelines) for s in tables.create()]
    statements += [
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{DAYS_TABLE} (view_name text, day date, "
        "version bigint, rows bigint, published_at timestamp, "
        "PRIMARY KEY ((view_name), day)) WITH CLUSTERING ORDER BY (day DESC)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{BOUNDARY_TABLE} (view_name text PRIMARY KEY, "
        "boundary timestamp, version bigint, run_id text, published_at timestamp)",
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{SUPERSEDED_TABLE} (view_name text, day date, "
        "version bigint, superseded_at timestamp, PRIMARY KEY ((view_name), day, version))",
    ]
    return statements


def create_tables(settings: Settings) -> None:
    """Create the batch serving tables (idempotent); part of ``platformctl up``."""
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    try:
        for statement in create_statements(settings.cassandra.keyspace):
            session.execute(statement)
    finally:
        cluster.shutdown()
