"""The consistency level of every statement on the platform's tables, by statement kind: one table.

The platform decides on what it reads: the speed fold reads a row, merges a
partial into it and writes the result back (a read that misses the last
write loses that write's counts, or folds a replayed batch twice); serving
caches closed windows and immutable batch partitions; the jobs and serving
follow the pointers (boundaries, day versions, the speed version, the runs,
the watermarks). On a replicated store every such read must see every
completed write, so writes and reads both run at ``LOCAL_QUORUM``: two
quorums of the local data centre's replicas always share one replica
(read-your-writes), and it is the level Amazon Keyspaces writes at and
serves strongly consistent reads at.

A statement's kind is the family of the table it touches and whether it
reads or writes (:func:`statement_kind`); :data:`CONSISTENCY` gives each kind
its level, and nothing else does: :func:`core.cassandra.prepare` sets it on
every statement it prepares, and :func:`core.cassandra.connect` makes
:data:`DEFAULT` the sessions' default for statements prepared elsewhere.

>>> consistency_of("SELECT version FROM ks.speed_versions WHERE view_name = ?")
'LOCAL_QUORUM'
>>> statement_kind("INSERT INTO ks.speed_v2_clicks_by_minute (window_start) VALUES (?)")
('speed_view', 'write')
"""

from __future__ import annotations

import re
from typing import Literal

from layout.pointers import (
    BOUNDARY_TABLE,
    DAYS_TABLE,
    PROGRESS_TABLE,
    RECONCILE_TABLE,
    RUNS_TABLE,
    SPEED_VERSIONS_TABLE,
    SUPERSEDED_TABLE,
    TOKENS_TABLE,
)

__all__ = [
    "CONSISTENCY",
    "DEFAULT",
    "FAMILIES",
    "consistency_of",
    "serial_consistency_of",
    "statement_kind",
]

Family = Literal[
    "speed_view", "batch_view", "batch_pointer", "speed_pointer", "reconcile", "access"
]
Access = Literal["read", "write"]
Kind = tuple[Family, Access]

FAMILIES: dict[str, Family] = {
    DAYS_TABLE: "batch_pointer",
    BOUNDARY_TABLE: "batch_pointer",
    SUPERSEDED_TABLE: "batch_pointer",
    SPEED_VERSIONS_TABLE: "speed_pointer",
    RUNS_TABLE: "speed_pointer",
    PROGRESS_TABLE: "speed_pointer",
    RECONCILE_TABLE: "reconcile",
    TOKENS_TABLE: "access",
}
"""The pointer and bookkeeping tables by name; every other ``speed_*`` / ``batch_*`` table is a
view table (:mod:`layout.views`)."""

LOCAL_QUORUM = "LOCAL_QUORUM"
LOCAL_SERIAL = "LOCAL_SERIAL"

CONSISTENCY: dict[Kind, str] = {
    # The fold's read-modify-write (sink.fold_rows) and serving's speed reads, whose merges
    # of closed windows it caches: both must see the last micro-batch's write.
    ("speed_view", "read"): LOCAL_QUORUM,
    ("speed_view", "write"): LOCAL_QUORUM,
    # Published rows are read through a pointer written after them and cached for good: the
    # read must see every row written before the pointer.
    ("batch_view", "read"): LOCAL_QUORUM,
    ("batch_view", "write"): LOCAL_QUORUM,
    # Boundaries, day versions, superseded versions: what serving and maintenance follow.
    ("batch_pointer", "read"): LOCAL_QUORUM,
    ("batch_pointer", "write"): LOCAL_QUORUM,
    # The speed version serving reads, the runs the job resumes and switches, the progress
    # whose watermark no boundary may pass.
    ("speed_pointer", "read"): LOCAL_QUORUM,
    ("speed_pointer", "write"): LOCAL_QUORUM,
    ("reconcile", "read"): LOCAL_QUORUM,
    ("reconcile", "write"): LOCAL_QUORUM,
    # Issued tokens: a revocation written must be seen by the services' next read of them.
    ("access", "read"): LOCAL_QUORUM,
    ("access", "write"): LOCAL_QUORUM,
}
"""The consistency level (the driver's ``ConsistencyLevel`` name) of each statement kind."""

DEFAULT = LOCAL_QUORUM
"""The sessions' default (:func:`core.cassandra.connect`): the level of a statement prepared
without :func:`core.cassandra.prepare` (serving's and the batch layer's own reads and writes
of the same tables)."""

_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE)\s+(?:\w+\.)?(\w+)", re.IGNORECASE)
_VIEW_TABLE = re.compile(r"(speed|batch)_\w+")


def statement_kind(cql: str) -> Kind:
    """``(family, access)`` of a statement on one of the platform's tables."""
    verb = cql.lstrip().split(None, 1)[0].upper() if cql.strip() else ""
    access: Access | None = (
        "read" if verb == "SELECT" else "write" if verb in ("INSERT", "UPDATE", "DELETE") else None
    )
    found = _TABLE.search(cql)
    if access is None or found is None:
        raise ValueError(
            f"Cannot tell which table {cql[:120]!r} reads or writes: give the consistency only "
            "SELECT, INSERT, UPDATE or DELETE statements on one table (layout's statements)."
        )
    table = found.group(1).lower()
    family = FAMILIES.get(table)
    if family is None and (view := _VIEW_TABLE.fullmatch(table)) is not None:
        family = "speed_view" if view.group(1) == "speed" else "batch_view"
    if family is None:
        raise ValueError(
            f"Table {table!r} of {cql[:120]!r} is not one of the platform's tables; declare it "
            "in layout/ and give its family a consistency in layout.consistency.CONSISTENCY."
        )
    return family, access


def consistency_of(cql: str) -> str:
    """The consistency level (a ``ConsistencyLevel`` name) ``cql`` runs at."""
    return CONSISTENCY[statement_kind(cql)]


_CONDITION = re.compile(r"\sIF\s+(?!NOT\s+EXISTS\b)(?!EXISTS\b)\w+\s*=", re.IGNORECASE)


def serial_consistency_of(cql: str) -> str | None:
    """The serial consistency (Paxos round) of a conditional write (``... IF state = ?``, a
    lightweight transaction), within the local data centre as its quorum; None for others.

    >>> serial_consistency_of("UPDATE ks.speed_runs SET state = ? WHERE g = ? IF state = ?")
    'LOCAL_SERIAL'
    >>> serial_consistency_of("UPDATE ks.speed_runs SET state = ? WHERE g = ?") is None
    True
    """
    return LOCAL_SERIAL if _CONDITION.search(cql) else None
