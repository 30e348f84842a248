"""What tests share about the local Cassandra: the schema timeout, and a pool of keyspaces
that already hold the whole table layout."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.settings import Settings

__all__ = ["SCHEMA_TIMEOUT_S", "LaidOutKeyspaces"]

SCHEMA_TIMEOUT_S = 120.0
"""Seconds a test's schema change (a keyspace dropped at teardown) may take: the node agrees
the change with itself and rewrites its schema tables, which takes far longer than a read
while the suite's Spark jobs hold both cores (the driver's default is 10 s)."""

_ONE_REPLICA = {"class": "SimpleStrategy", "replication_factor": 1}
_TABLES = (
    "SELECT table_name, default_time_to_live FROM system_schema.tables WHERE keyspace_name = %s"
)
_COLUMNS = (
    "SELECT table_name, column_name, type, kind FROM system_schema.columns WHERE keyspace_name = %s"
)
_WRITES = "SELECT table_name, count FROM system_views.local_write_latency WHERE keyspace_name = %s"
"""Writes (inserts, updates, deletes) each table of a keyspace took since the node started:
a table whose count did not move while it was lent holds neither a row nor a tombstone."""
_BUSY_POOLS = (
    "SELECT name, active_tasks, pending_tasks, blocked_tasks FROM system_views.thread_pools"
)


_IDLE_KEPT = 3
"""Idle keyspaces kept per process: each holds ~50 tables of the node's heap (~0.4 MB each)."""


def _by_table(schema: frozenset) -> dict[str, frozenset]:
    """A keyspace's schema (its tables' TTLs and columns) table by table."""
    tables: dict[str, set] = defaultdict(set)
    for entry in schema:
        tables[entry[0]].add(entry)
    return {table: frozenset(entries) for table, entries in tables.items()}


class LaidOutKeyspaces:
    """Keyspaces holding every table of the layout, lent to one test at a time.

    Creating the layout's tables costs the node about 14 CPU seconds and dropping them 11,
    against 2 to empty them: a keyspace given back has the tables the test wrote to
    truncated, the tables it created dropped and those it dropped created again (a replay
    switches to tables of a new version), and is lent again. One whose tables a test
    changed (another TTL, a new column) is dropped, and so is the oldest idle one past
    three (tests that need another TTL alternate with the rest). Keyspaces are per process
    and per run (``t_pool_<run>_<n>``) and dropped by :meth:`close`.
    """

    def __init__(self, session, log: Path | None = None) -> None:
        self.session = session
        self.log = log
        """The node's own log, whose last warnings a failed schema change reports."""
        self.stalled: str | None = None
        """Why the node's schema changes stalled, once one timed out: later tests fail at
        once with it, instead of each waiting out the timeout behind the first."""
        self.prefix = f"t_pool_{uuid.uuid4().hex[:8]}"
        self._made = 0
        self._free: dict[int, list[str]] = defaultdict(list)
        self._made_as: dict[str, tuple[int, frozenset]] = {}
        self._made_with: dict[str, Settings] = {}
        self._writes_at_lend: dict[str, dict[str, int]] = {}
        self.truncated = 0
        """Tables truncated on the way back, over the run (the rest had no write to undo)."""
        self.restored = 0
        """Keyspaces given back with tables made or dropped, whose first tables were made
        again instead of the whole keyspace."""

    def take(self, settings: Settings) -> str:
        """A keyspace with every table ``create_tables(settings)`` makes, and no rows."""
        ttl_s = settings.speed.ttl_s
        if self._free[ttl_s]:
            return self._free[ttl_s].pop()
        if self.stalled:
            raise RuntimeError(f"an earlier schema change timed out; {self.stalled}")
        from core.cassandra import ensure_keyspace
        from layout import create_tables

        name = f"{self.prefix}_{self._made}"
        self._made += 1
        try:
            ensure_keyspace(self.session, name, _ONE_REPLICA)
            cassandra = settings.cassandra.model_copy(update={"keyspace": name})
            create_tables(settings.model_copy(update={"cassandra": cassandra}))
        except BaseException as failed:
            from cassandra import OperationTimedOut

            if isinstance(failed, OperationTimedOut):
                self.stalled = self.node_state()
                failed.add_note(self.stalled)
                raise  # a drop would wait out its timeout behind the stalled change
            # A keyspace half made (a timeout the node went on with) would stay for the rest
            # of the run, and every later schema change would be slower for it.
            self._drop(name)
            raise
        self._made_as[name] = (ttl_s, self._schema(name))
        self._made_with[name] = settings.model_copy(update={"cassandra": cassandra})
        return name

    @contextmanager
    def lend(self, settings: Settings) -> Iterator[Settings]:
        """``settings`` with a laid-out keyspace of their own, given back on exit once no
        speed job the test started can still write to it."""
        from tests.support.speed import kill_leftover_jobs

        name = self.take(settings)
        self._writes_at_lend[name] = self._writes(name)
        try:
            cassandra = settings.cassandra.model_copy(update={"keyspace": name})
            yield settings.model_copy(update={"cassandra": cassandra})
        finally:
            kill_leftover_jobs()
            self.give_back(name)

    def give_back(self, name: str) -> None:
        """Empty the keyspace for the next test; undo the tables it created or dropped (a
        replay's new version); drop the keyspace if it changed one of its tables."""
        ttl_s, made = self._made_as[name]
        writes_at_lend = self._writes_at_lend.pop(name, {})
        now = self._schema(name)
        made_tables, now_tables = _by_table(made), _by_table(now)
        changed = any(now_tables[t] != made_tables[t] for t in made_tables.keys() & now_tables)
        if changed:  # a column added, another TTL: only a new keyspace undoes it
            self._discard(name)
            return
        # Only the tables the test wrote to: each truncation flushes its table, records its
        # time in the node's own tables and waits for its compactions, and most tests write
        # to a few of the ~50. Every table written to, not only those holding rows: a row
        # deleted leaves a tombstone that would hide the next test's older-stamped writes.
        # Four at a time: all at once held every write thread of the node.
        from cassandra.concurrent import execute_concurrent

        from core.cassandra import SCHEMA_PROFILE

        tables = sorted(
            table
            for table, count in self._writes(name).items()
            if count != writes_at_lend.get(table, 0) and table in made_tables
        )
        self.truncated += len(tables)
        execute_concurrent(
            self.session,
            [(f"TRUNCATE {name}.{table}", ()) for table in tables],
            concurrency=4,
            execution_profile=SCHEMA_PROFILE,
        )
        if now != made:
            # A replay made a version of its own and dropped the first one's tables: a few
            # tables to drop and create again, against the ~50 of a new keyspace.
            from layout import create_tables

            for table in sorted(now_tables.keys() - made_tables.keys()):
                self.session.execute(f"DROP TABLE {name}.{table}", timeout=SCHEMA_TIMEOUT_S)
            create_tables(self._made_with[name])
            self.restored += 1
            if self._schema(name) != made:
                self._discard(name)
                return
        # A few idle keyspaces: tests that need another TTL alternate with the rest, and a
        # keyspace dropped is ~50 tables to create again for the next of them.
        idle = [n for names in self._free.values() for n in names]
        for oldest in idle[: max(0, len(idle) + 1 - _IDLE_KEPT)]:
            self._free[self._made_as[oldest][0]].remove(oldest)
            self._discard(oldest)
        self._free[ttl_s].append(name)

    def _discard(self, name: str) -> None:
        """Drop the keyspace and forget it."""
        del self._made_as[name]
        del self._made_with[name]
        self._drop(name)

    def close(self) -> None:
        for name in list(self._made_as):
            self._drop(name)
        self._made_as.clear()
        self._made_with.clear()
        self._free.clear()

    def node_state(self) -> str:
        """What the node is busy with (its thread pools with work queued or running) and how
        many tables it holds: the note a failed schema change carries."""
        try:
            busy = [
                f"{r.name} {r.active_tasks} active/{r.pending_tasks} pending"
                f"/{r.blocked_tasks} blocked"
                for r in self.session.execute(_BUSY_POOLS)
                if r.active_tasks or r.pending_tasks or r.blocked_tasks
            ]
            tables = len(list(self.session.execute("SELECT table_name FROM system_schema.tables")))
            state = f"cassandra: {tables} tables; busy pools: {'; '.join(busy) or 'none'}"
        except Exception as unknown:  # the node may not answer at all
            state = f"cassandra's state could not be read: {unknown!r}"
        if self.log is not None and self.log.exists():
            with self.log.open(errors="replace") as lines:
                warnings = [line for line in lines if line.startswith(("WARN", "ERROR"))]
            state += "\nthe last warnings of its log:\n" + "".join(warnings[-8:])
        return state

    def _writes(self, name: str) -> dict[str, int]:
        return {r.table_name: r.count for r in self.session.execute(_WRITES, (name,))}

    def _drop(self, name: str) -> None:
        self.session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=SCHEMA_TIMEOUT_S)

    def _tables(self, name: str) -> set[tuple[str, int]]:
        rows = self.session.execute(_TABLES, (name,))
        return {(row.table_name, row.default_time_to_live) for row in rows}

    def _schema(self, name: str) -> frozenset:
        columns = {tuple(r) for r in self.session.execute(_COLUMNS, (name,))}
        return frozenset(self._tables(name) | columns)
