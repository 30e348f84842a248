"""Connecting to Cassandra the same way everywhere (local node or a managed cluster).

Statements run at the consistency :mod:`layout.consistency` gives their kind:
:func:`prepare` sets it on each statement, and :func:`connect` makes its
default the sessions' default for statements prepared elsewhere.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.settings import CassandraSettings

if TYPE_CHECKING:
    from cassandra.cluster import Cluster, Session
    from cassandra.query import PreparedStatement

__all__ = [
    "PROTOCOL_VERSION",
    "SCHEMA_PROFILE",
    "connect",
    "ensure_keyspace",
    "execute_all",
    "execute_schema",
    "fetch_all",
    "logged_batch",
    "prepare",
    "process_session",
    "replication_cql",
    "view_row_values",
]

_SESSIONS: dict[str, Session] = {}
_SESSIONS_LOCK = threading.Lock()
PROTOCOL_VERSION = 4
"""The native protocol every session speaks. Not 5: the Python driver's v5 reader
(3.30.1) drops the bytes of a segment header that a socket read splits (fewer than its
six bytes at the end of one read), so the next header is read misaligned and the
connection fails with "CRC mismatch on header". Large responses, such as the schema
read of a node holding many keyspaces, cross many reads and meet it. Version 4 frames
carry the same statements; TCP's own checksum covers what v5's segments add."""
SCHEMA_PROFILE = "schema"
"""The execution profile of every session :func:`connect` opens that schema changes run
with (:func:`execute_schema`): ``cassandra.schema_timeout_s`` instead of a request's."""


def connect(
    cassandra: CassandraSettings, *, connect_timeout_s: float = 10, schema: bool | None = None
) -> tuple[Cluster, Session]:
    """Open a cluster connection; the caller shuts the cluster down.

    ``schema`` (by default ``cassandra.token_aware``): the driver reads the schema and token
    metadata, so that requests go to a replica of their partition. ``schema=False`` skips
    them (a status probe's few reads): connecting then costs no read of every keyspace's
    tables, which a busy node holding hundreds of them can take seconds to answer."""
    if schema is None:
        schema = cassandra.token_aware
    from cassandra import ConsistencyLevel
    from cassandra.auth import PlainTextAuthProvider
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import (
        DCAwareRoundRobinPolicy,
        ExponentialReconnectionPolicy,
        TokenAwarePolicy,
    )

    auth = None
    if cassandra.username and cassandra.password:
        auth = PlainTextAuthProvider(cassandra.username, cassandra.password.get_secret_value())
    ssl_context = None
    if cassandra.ssl:
        import ssl

        ssl_context = ssl.create_default_context()
    cluster = Cluster(
        contact_points=list(cassandra.contact_points),
        port=cassandra.port,
        auth_provider=auth,
        ssl_context=ssl_context,
        execution_profiles={
            EXEC_PROFILE_DEFAULT: ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(
                    DCAwareRoundRobinPolicy(local_dc=cassandra.local_datacenter)
                ),
                request_timeout=cassandra.request_timeout_s,
                consistency_level=ConsistencyLevel.name_to_value[_default_consistency()],
            ),
            SCHEMA_PROFILE: ExecutionProfile(
                load_balancing_policy=TokenAwarePolicy(
                    DCAwareRoundRobinPolicy(local_dc=cassandra.local_datacenter)
                ),
                request_timeout=cassandra.schema_timeout_s,
            ),
        },
        protocol_version=PROTOCOL_VERSION,
        # Back within seconds of a node restart (the default backs off to 10 minutes).
        reconnection_policy=ExponentialReconnectionPolicy(base_delay=0.5, max_delay=5.0),
        connect_timeout=connect_timeout_s,
        # The control connection reads the whole schema when it connects; the driver gives
        # those reads 2 s, which a busy node with many keyspaces (hundreds of tables: every
        # view has several) does not always answer in. The connect's own timeout instead.
        control_connection_timeout=connect_timeout_s,
        schema_metadata_enabled=schema,
        token_metadata_enabled=schema,
    )
    return cluster, cluster.connect()


def _default_consistency() -> str:
    from layout.consistency import DEFAULT

    return DEFAULT


_PREPARED: weakref.WeakKeyDictionary[Any, dict[str, PreparedStatement]] = (
    weakref.WeakKeyDictionary()
)


def prepare(session: Session, cql: str) -> PreparedStatement:
    """``cql`` prepared on ``session`` (once per session) at its kind's consistency
    (:func:`layout.consistency.consistency_of`): every statement the platform decides on is
    prepared here."""
    from cassandra import ConsistencyLevel

    from layout.consistency import consistency_of, serial_consistency_of

    prepared = _PREPARED.setdefault(session, {})
    if cql not in prepared:
        statement = session.prepare(cql)
        statement.consistency_level = ConsistencyLevel.name_to_value[consistency_of(cql)]
        if (serial := serial_consistency_of(cql)) is not None:
            statement.serial_consistency_level = ConsistencyLevel.name_to_value[serial]
        prepared[cql] = statement
    return prepared[cql]


def logged_batch(statements: Sequence[tuple[PreparedStatement, Sequence[Any]]]) -> Any:
    """One logged batch of ``(prepared statement, values)``: all of them apply or none, at
    their consistency (the same for every statement of the batch)."""
    from cassandra.query import BatchStatement, BatchType

    levels = {statement.consistency_level for statement, _ in statements}
    if len(levels) != 1:
        raise ValueError(
            f"A batch runs at one consistency; its statements have {sorted(map(str, levels))}: "
            "batch statements of one kind (layout.consistency)."
        )
    batch = BatchStatement(batch_type=BatchType.LOGGED, consistency_level=levels.pop())
    for statement, values in statements:
        batch.add(statement, values)
    return batch


def replication_cql(replication: Mapping[str, str | int]) -> str:
    """Render a replication map as CQL, validating it first.

    >>> replication_cql({"class": "SimpleStrategy", "replication_factor": 1})
    "{'class': 'SimpleStrategy', 'replication_factor': '1'}"
    """
    if "class" not in replication:
        raise ValueError(f"Keyspace replication needs a 'class', got {dict(replication)!r}.")
    parts = []
    for key, value in replication.items():
        if not str(key).replace("_", "").replace("-", "").isalnum() or "'" in str(value):
            raise ValueError(f"Unsafe replication entry {key!r}: {value!r}.")
        parts.append(f"'{key}': '{value}'")
    return "{" + ", ".join(parts) + "}"


def ensure_keyspace(session: Session, keyspace: str, replication: Mapping[str, str | int]) -> None:
    """CREATE KEYSPACE IF NOT EXISTS (identifiers cannot be bound, so they are validated)."""
    if not keyspace.replace("_", "").isalnum():
        raise ValueError(f"Invalid keyspace name {keyspace!r}: use letters, digits and '_'.")
    execute_schema(
        session,
        f"CREATE KEYSPACE IF NOT EXISTS {keyspace} "
        f"WITH replication = {replication_cql(replication)} AND durable_writes = true",
    )


def execute_schema(session: Session, statement: str) -> Any:
    """Run one schema change (CREATE, ALTER, DROP, TRUNCATE) with the schema timeout
    (``cassandra.schema_timeout_s``) instead of a request's: a node applies schema changes
    one after another, so one queued behind others can wait long past a read's 10 s."""
    return session.execute(statement, execution_profile=SCHEMA_PROFILE)


def process_session(cassandra: CassandraSettings) -> Session:
    """This process's session for ``cassandra``, opened on first use and then kept, and
    closed when the process exits.

    For code on Spark executors: Spark reuses its Python workers, so each keeps
    one connection instead of opening one per partition or micro-batch. The
    speed job's driver folds with it too, from a thread per view: it is opened
    once whichever thread comes first.
    """
    key = cassandra.model_dump_json()
    with _SESSIONS_LOCK:
        if key not in _SESSIONS:
            if not _SESSIONS:
                atexit.register(_close_process_sessions)
            _SESSIONS[key] = connect(cassandra)[1]
        return _SESSIONS[key]


def _close_process_sessions() -> None:
    with _SESSIONS_LOCK:
        for session in _SESSIONS.values():
            session.cluster.shutdown()
        _SESSIONS.clear()


def execute_all(
    session: Session,
    statement: PreparedStatement,
    args: Sequence[Sequence[Any]],
    concurrency: int = 64,
) -> None:
    """Execute ``statement`` once per tuple of ``args``, many in flight; raise the first error."""
    from cassandra.concurrent import execute_concurrent_with_args

    results = execute_concurrent_with_args(
        session, statement, args, concurrency=concurrency, raise_on_first_error=True
    )
    for ok, result in results:
        if not ok:
            raise result


def fetch_all(
    session: Session,
    reads: Sequence[tuple[PreparedStatement, Sequence[Any]]],
    concurrency: int = 64,
) -> list[list[Any]]:
    """Execute each ``(statement, values)``, many in flight; every row of each result (all its
    pages), in the order of ``reads``. Raises the first error.

    For reading many partitions whole (e.g. every key of each minute window).
    """
    from cassandra.concurrent import execute_concurrent

    results = execute_concurrent(session, reads, concurrency=concurrency, raise_on_first_error=True)
    rows = []
    for ok, result in results:
        if not ok:
            raise result
        rows.append(list(result))  # further pages are fetched here
    return rows


def view_row_values(
    row: Mapping[str, Any], keys: Iterable[str], measures: Iterable[str]
) -> tuple[datetime, list[Any], list[Any]]:
    """``(window_start in UTC, key values, measure values)`` of a Spark view row, as CQL takes them.

    PySpark returns timestamps as naive local time and binary columns as
    ``bytearray``; the driver wants aware datetimes and ``bytes``.

    >>> start, k, v = view_row_values(
    ...     {"window_start": datetime(2024, 1, 1, tzinfo=UTC), "path": "/", "hll": bytearray(b"x")},
    ...     ["path"], ["hll"])
    >>> (start.isoformat(), k, v)
    ('2024-01-01T00:00:00+00:00', ['/'], [b'x'])
    """
    start = row["window_start"].astimezone(UTC)
    values = [bytes(v) if isinstance(v, bytearray) else v for v in (row[m] for m in measures)]
    return start, [row[k] for k in keys], values
