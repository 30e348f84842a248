"""The pointer and bookkeeping tables, and every statement the platform runs on them.

Batch pointers (written by the batch layer's publish, read by serving):

- ``batch_days``: per view and day, the version serving must read (the
  atomic switch: a publish writes the new version's rows first, then these
  pointers, then the boundary), and whether that version has its hour and day
  rollups (``rollups``: false or null for a day an older release published,
  which serving answers from its minutes);
- ``batch_boundary``: per view, the end of the newest complete, validated
  period. Serving answers windows before it from the batch tables and
  windows at or after it from the speed tables;
- ``batch_superseded``: versions a newer publish replaced, and when; the
  maintenance DAG deletes their rows once no reader can still hold the old
  pointer.

Speed bookkeeping (written by the speed layer):

- ``speed_progress``: per view, the last micro-batch written, the newest
  event time and watermark it reflected and when, rates, Kafka lag, the
  cumulative rows dropped, and the run it belongs to, so freshness is a
  single-row read (serving, ``platformctl status``, ``speed_layer reset``;
  bronze records the watermarks, :func:`read_watermarks`, which publish never
  moves a boundary past);
- ``speed_runs``: one row per run (checkpoint generation) of the speed
  layer, newest first: where it starts reading, its floor, the output
  version it writes, its state (``live``, ``replaying``, ``retired``,
  ``abandoned``) and, while it replays, its catch-up;
- ``speed_versions``: per view, the version of the speed tables serving
  must read (:attr:`layout.views.ViewTables.table_version`); a Kappa replay
  writes a new version and switches these pointers once it has caught up.

The reconciliation (written by the batch layer's ``reconcile`` step, read by
serving and ``platformctl status``):

- ``reconcile_results``: per view, the last comparison of the published
  batch rows with the speed rows on closed windows (:data:`RECONCILE_COLUMNS`).

Every statement takes ``?`` markers: prepare it, then bind.

>>> PointerTables("ks").select_days
'SELECT day, version, rollups FROM ks.batch_days WHERE view_name = ?'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

__all__ = [
    "BOUNDARY_TABLE",
    "DAYS_COLUMNS",
    "DAYS_TABLE",
    "PROGRESS_COLUMNS",
    "PROGRESS_TABLE",
    "RECONCILE_COLUMNS",
    "RECONCILE_TABLE",
    "RUNS_COLUMNS",
    "RUNS_TABLE",
    "SPEED_VERSIONS_TABLE",
    "SUPERSEDED_TABLE",
    "TOKENS_TABLE",
    "PointerTables",
    "missing_columns",
]

BOUNDARY_TABLE = "batch_boundary"
DAYS_TABLE = "batch_days"
SUPERSEDED_TABLE = "batch_superseded"
DAYS_COLUMNS = {"rollups": "boolean"}
"""Columns of ``batch_days`` a table created by an older release may lack."""
PROGRESS_TABLE = "speed_progress"
RUNS_TABLE = "speed_runs"
SPEED_VERSIONS_TABLE = "speed_versions"
RECONCILE_TABLE = "reconcile_results"
TOKENS_TABLE = "access_tokens"
"""The issued tokens: named here with the keyspace's other tables, its statements are
:mod:`access.store`'s."""

RUNS_COLUMNS = {
    "starting_offsets": "text",
    "floor": "timestamp",
    "requested": "text",
    "created_at": "timestamp",
    "version": "int",
    "state": "text",
    "switched_at": "timestamp",
    "retired_at": "timestamp",
    "dropped_at": "timestamp",
    "progress_at": "timestamp",
    "batch_id": "bigint",
    "kafka_lag": "bigint",
    "max_event_time": "timestamp",
    "input_rows_per_s": "double",
    "processed_rows_per_s": "double",
    "caught_up_since": "timestamp",
}
"""``speed_runs``, per (checkpoint name, generation): where the run reads from, the version it
writes, its state and when it changed, and while it replays, its catch-up."""

PROGRESS_COLUMNS = {
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


RECONCILE_COLUMNS = {
    "checked_at": "timestamp",
    "run_id": "text",
    "window_from": "timestamp",
    "window_to": "timestamp",
    "windows_compared": "int",
    "windows_differing": "int",
    "rows_compared": "bigint",
    "rows_differing": "bigint",
    "rows_skipped_late": "bigint",
    "largest_difference": "double",
    "largest_at": "text",
    "speed_version": "int",
    "max_differing_windows": "int",
    "passed": "boolean",
    "report": "text",
}
"""``reconcile_results``, per view: the last reconciliation, when and by which run, the
windows ``[window_from, window_to)`` it covered, what it compared and found (the largest
relative difference and where: window, key, measure, batch vs speed), the speed version it
read, the threshold it was held to, whether it passed, and the report's path."""


def _marks(n: int) -> str:
    return ", ".join("?" * n)


def _progress(columns: Sequence[str]) -> Sequence[str]:
    unknown = [c for c in columns if c not in PROGRESS_COLUMNS]
    if unknown:
        raise ValueError(
            f"{PROGRESS_TABLE} has no columns {unknown}; it has: {', '.join(PROGRESS_COLUMNS)}."
        )
    return columns


@dataclass(frozen=True)
class PointerTables:
    """The pointer and bookkeeping tables of one keyspace and the statements run on them."""

    keyspace: str

    @property
    def boundary(self) -> str:
        return f"{self.keyspace}.{BOUNDARY_TABLE}"

    @property
    def days(self) -> str:
        return f"{self.keyspace}.{DAYS_TABLE}"

    @property
    def superseded(self) -> str:
        return f"{self.keyspace}.{SUPERSEDED_TABLE}"

    @property
    def progress(self) -> str:
        return f"{self.keyspace}.{PROGRESS_TABLE}"

    @property
    def runs(self) -> str:
        return f"{self.keyspace}.{RUNS_TABLE}"

    @property
    def speed_versions(self) -> str:
        return f"{self.keyspace}.{SPEED_VERSIONS_TABLE}"

    @property
    def reconcile(self) -> str:
        return f"{self.keyspace}.{RECONCILE_TABLE}"

    def create(self) -> list[str]:
        """Every CREATE TABLE of the pointer and bookkeeping tables (idempotent)."""
        progress = ", ".join(f"{name} {cql}" for name, cql in PROGRESS_COLUMNS.items())
        runs = ", ".join(f"{name} {cql}" for name, cql in RUNS_COLUMNS.items())
        reconcile = ", ".join(f"{name} {cql}" for name, cql in RECONCILE_COLUMNS.items())
        return [
            f"CREATE TABLE IF NOT EXISTS {self.progress} (view_name text PRIMARY KEY, {progress})",
            f"CREATE TABLE IF NOT EXISTS {self.runs} (checkpoint_name text, generation int, "
            f"{runs}, PRIMARY KEY (checkpoint_name, generation)) "
            "WITH CLUSTERING ORDER BY (generation DESC)",
            f"CREATE TABLE IF NOT EXISTS {self.speed_versions} (view_name text PRIMARY KEY, "
            "version int, run_generation int, switched_at timestamp)",
            f"CREATE TABLE IF NOT EXISTS {self.days} (view_name text, day date, "
            "version bigint, rows bigint, published_at timestamp, rollups boolean, "
            "PRIMARY KEY ((view_name), day)) WITH CLUSTERING ORDER BY (day DESC)",
            f"CREATE TABLE IF NOT EXISTS {self.boundary} (view_name text PRIMARY KEY, "
            "boundary timestamp, version bigint, run_id text, published_at timestamp)",
            f"CREATE TABLE IF NOT EXISTS {self.superseded} (view_name text, day date, "
            "version bigint, superseded_at timestamp, PRIMARY KEY ((view_name), day, version))",
            f"CREATE TABLE IF NOT EXISTS {self.reconcile} (view_name text PRIMARY KEY, "
            f"{reconcile})",
        ]

    # -- batch_days ---------------------------------------------------------------------------

    @property
    def select_days(self) -> str:
        """``(day, version, rollups)`` of every published day of a view. Binds ``(view_name,)``."""
        return f"SELECT day, version, rollups FROM {self.days} WHERE view_name = ?"

    @property
    def select_day(self) -> str:
        """``(version,)`` a view's day points at. Binds ``(view_name, day)``."""
        return f"SELECT version FROM {self.days} WHERE view_name = ? AND day = ?"

    @property
    def insert_day(self) -> str:
        """Point a view's day at a version. Binds ``(view_name, day, version, rows, now,
        rollups)``; ``rollups``: the version has its hour and day rows."""
        return (
            f"INSERT INTO {self.days} (view_name, day, version, rows, published_at, rollups) "
            f"VALUES ({_marks(6)})"
        )

    # -- batch_superseded ---------------------------------------------------------------------

    @property
    def insert_superseded(self) -> str:
        """List a replaced version. Binds ``(view_name, day, version, now)``."""
        return (
            f"INSERT INTO {self.superseded} (view_name, day, version, superseded_at) "
            f"VALUES ({_marks(4)})"
        )

    @property
    def select_superseded(self) -> str:
        """``(day, version, superseded_at)`` of each replaced version. Binds ``(view_name,)``."""
        return f"SELECT day, version, superseded_at FROM {self.superseded} WHERE view_name = ?"

    @property
    def delete_superseded(self) -> str:
        """Forget a deleted version. Binds ``(view_name, day, version)``."""
        return f"DELETE FROM {self.superseded} WHERE view_name = ? AND day = ? AND version = ?"

    # -- batch_boundary -----------------------------------------------------------------------

    @property
    def select_boundary(self) -> str:
        """A view's boundary row (read by :func:`read_boundaries`). Binds ``(view_name,)``."""
        return (
            f"SELECT boundary, version, run_id, published_at FROM {self.boundary} "
            "WHERE view_name = ?"
        )

    @property
    def select_boundary_ms(self) -> str:
        """``(boundary epoch ms,)`` (serving's asynchronous read). Binds ``(view_name,)``."""
        return f"SELECT toUnixTimestamp(boundary) FROM {self.boundary} WHERE view_name = ?"

    @property
    def insert_boundary(self) -> str:
        """Move a view's boundary. Binds ``(view_name, boundary, version, run_id, now)``."""
        return (
            f"INSERT INTO {self.boundary} (view_name, boundary, version, run_id, published_at) "
            f"VALUES ({_marks(5)})"
        )

    # -- speed_progress -----------------------------------------------------------------------

    def insert_progress(self, columns: Sequence[str]) -> str:
        """A micro-batch's progress. Binds ``(view_name, *columns)``."""
        return (
            f"INSERT INTO {self.progress} ({', '.join(('view_name', *_progress(columns)))}) "
            f"VALUES ({_marks(1 + len(columns))})"
        )

    def select_progress(self, columns: Sequence[str] | None = None) -> str:
        """Every view's progress row: ``view_name`` and ``columns`` (None: every column).

        A scan of the whole table: for operators' listings. A request path reads the views
        it serves with :meth:`select_progress_of`."""
        if columns is None:
            return f"SELECT * FROM {self.progress}"
        return f"SELECT {', '.join(('view_name', *_progress(columns)))} FROM {self.progress}"

    def select_progress_of(self, columns: Sequence[str]) -> str:
        """The progress rows of the views named: ``view_name`` and ``columns``. Binds
        ``(view_names,)``, a list. Partition reads, which a replicated ring answers while
        a replica has just died: the coordinator asks another replica when one is slow
        (speculative retry, which Cassandra does for partition reads only) and gives up on
        it after the read timeout (5 s), inside a client's 10 s. A scan waits on the dead
        replica for the range timeout (10 s), as long as the client does."""
        return f"{self.select_progress(columns)} WHERE view_name IN ?"

    @property
    def select_freshness_ms(self) -> str:
        """``(max_event_time, watermark, heartbeat_at)`` in epoch ms, ``kafka_lag`` and
        ``run_generation`` of a view. Binds ``(view_name,)``."""
        return (
            "SELECT toUnixTimestamp(max_event_time), toUnixTimestamp(watermark), "
            "toUnixTimestamp(heartbeat_at), kafka_lag, run_generation "
            f"FROM {self.progress} WHERE view_name = ?"
        )

    @property
    def update_heartbeat(self) -> str:
        """An idle query is alive. Binds ``(heartbeat_at, view_name)``."""
        return f"UPDATE {self.progress} SET heartbeat_at = ? WHERE view_name = ?"

    @property
    def update_empty_batch(self) -> str:
        """A micro-batch without rows. Binds ``(heartbeat_at, kafka_lag, watermark,
        run_generation, view_name)``."""
        return (
            f"UPDATE {self.progress} SET heartbeat_at = ?, kafka_lag = ?, watermark = ?, "
            "run_generation = ? WHERE view_name = ?"
        )

    @property
    def update_stopped(self) -> str:
        """The job stopped on purpose. Binds ``(stopped_at, view_name)``."""
        return f"UPDATE {self.progress} SET stopped_at = ? WHERE view_name = ?"

    # -- speed_runs ---------------------------------------------------------------------------

    @property
    def select_runs(self) -> str:
        """Every run ``(generation, *RUNS_COLUMNS)``, newest first. Binds ``(checkpoint_name,)``."""
        return (
            f"SELECT generation, {', '.join(RUNS_COLUMNS)} FROM {self.runs} "
            "WHERE checkpoint_name = ?"
        )

    @property
    def insert_run(self) -> str:
        """Record a run. Binds ``(checkpoint_name, generation, starting_offsets, floor,
        requested, created_at, version, state)``."""
        return (
            f"INSERT INTO {self.runs} (checkpoint_name, generation, starting_offsets, floor, "
            f"requested, created_at, version, state) VALUES ({_marks(8)})"
        )

    def update_run(self, columns: Sequence[str], *, if_state: bool = False) -> str:
        """Set ``columns`` of one run. Binds ``(*columns, checkpoint_name, generation)``, and
        with ``if_state`` the state the run must still be in (a lightweight transaction: two
        transitions of one run, a switch and an abandon, cannot both win).

        >>> PointerTables("ks").update_run(["state"], if_state=True).split(" WHERE ")[1]
        'checkpoint_name = ? AND generation = ? IF state = ?'
        """
        unknown = [c for c in columns if c not in RUNS_COLUMNS]
        if unknown:
            raise ValueError(f"{RUNS_TABLE} has no columns {unknown}.")
        assignments = ", ".join(f"{c} = ?" for c in columns)
        condition = " IF state = ?" if if_state else ""
        return (
            f"UPDATE {self.runs} SET {assignments} WHERE checkpoint_name = ? AND generation = ?"
            f"{condition}"
        )

    # -- speed_versions -----------------------------------------------------------------------

    @property
    def select_speed_versions(self) -> str:
        """``(view_name, version)`` of the views named that were switched at least once.
        Binds ``(view_names,)``, a list: partition reads, as :meth:`select_progress_of`."""
        return f"SELECT view_name, version FROM {self.speed_versions} WHERE view_name IN ?"

    @property
    def select_speed_version(self) -> str:
        """``(version,)`` of one view. Binds ``(view_name,)``."""
        return f"SELECT version FROM {self.speed_versions} WHERE view_name = ?"

    @property
    def insert_speed_version(self) -> str:
        """Point a view at a speed version. Binds ``(view_name, version, run_generation,
        now)``."""
        return (
            f"INSERT INTO {self.speed_versions} (view_name, version, run_generation, "
            f"switched_at) VALUES ({_marks(4)})"
        )

    # -- reconcile_results --------------------------------------------------------------------

    @property
    def insert_reconcile(self) -> str:
        """A view's last reconciliation. Binds ``(view_name, *RECONCILE_COLUMNS)``."""
        columns = ("view_name", *RECONCILE_COLUMNS)
        return (
            f"INSERT INTO {self.reconcile} ({', '.join(columns)}) VALUES ({_marks(len(columns))})"
        )

    @property
    def select_reconcile(self) -> str:
        """A view's last reconciliation, :data:`RECONCILE_COLUMNS` (timestamps in epoch ms).
        Binds ``(view_name,)``."""
        columns = ", ".join(
            f"toUnixTimestamp({c})" if cql == "timestamp" else c
            for c, cql in RECONCILE_COLUMNS.items()
        )
        return f"SELECT {columns} FROM {self.reconcile} WHERE view_name = ?"


def missing_columns(
    session: Any,
    keyspace: str,
    table: str = PROGRESS_TABLE,
    columns: Mapping[str, str] | None = None,
) -> list[str]:
    """ALTER TABLE statements adding the ``columns`` (name -> CQL type; default the progress
    columns) that ``table`` of an older version lacks."""
    present = {
        row.column_name
        for row in session.execute(
            "SELECT column_name FROM system_schema.columns "
            "WHERE keyspace_name = %s AND table_name = %s",
            (keyspace, table),
        )
    }
    wanted = PROGRESS_COLUMNS if columns is None else columns
    return [
        f"ALTER TABLE {keyspace}.{table} ADD {name} {cql}"
        for name, cql in wanted.items()
        if name not in present
    ]
