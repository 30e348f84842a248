"""The pointer reads the layers and services make: one place for each question.

- :func:`read_boundaries`: each view's published batch boundary;
- :func:`read_speed_versions`: the version of the speed tables serving reads;
- :func:`read_watermarks`: the speed layer's watermark per view (what publish
  never moves a boundary past);
- :func:`read_speed_progress`: that watermark with when the speed layer last wrote
  rows and the run that wrote them (what tells a reader of the speed rows they changed);
- :func:`read_live_floor`: the live speed run's floor;
- :func:`read_reconcile_results`: each view's last speed-vs-batch comparison.

The tables and statements are :class:`layout.pointers.PointerTables`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from layout.pointers import RECONCILE_COLUMNS, PointerTables

if TYPE_CHECKING:
    from core.settings import CassandraSettings

__all__ = [
    "Boundary",
    "SpeedProgress",
    "read_boundaries",
    "read_live_floor",
    "read_reconcile_results",
    "read_speed_progress",
    "read_speed_versions",
    "read_watermarks",
]


@dataclass(frozen=True)
class Boundary:
    """A view's published batch boundary: windows before :attr:`at` are served from batch."""

    at: datetime
    """The boundary (UTC)."""
    version: int | None
    """The publish (batch version) that moved it last."""
    run_id: str | None
    published_at: datetime | None
    """When it moved (UTC)."""


def _utc(value: datetime | None) -> datetime | None:
    # The driver returns naive UTC datetimes.
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def read_boundaries(
    cassandra: CassandraSettings, views: Iterable[str], *, session: Any = None
) -> dict[str, Boundary | None]:
    """Per view name, its published boundary (None: the batch layer never published it).

    Reads with ``session`` when given, else on a connection of its own.
    """
    if session is None:
        from core.cassandra import connect

        cluster, own = connect(cassandra)
        try:
            return read_boundaries(cassandra, views, session=own)
        finally:
            cluster.shutdown()
    from core.cassandra import prepare

    select = prepare(session, PointerTables(cassandra.keyspace).select_boundary)
    out: dict[str, Boundary | None] = {}
    for name in views:
        row = session.execute(select, (name,)).one()
        out[name] = None
        if row is not None and row.boundary is not None:
            out[name] = Boundary(
                _utc(row.boundary), row.version, row.run_id, _utc(row.published_at)
            )
    return out


def read_speed_versions(session: Any, keyspace: str, views: Iterable[str]) -> dict[str, int]:
    """Per view name, the speed version serving reads (0 until a replay switched it)."""
    from core.cassandra import prepare

    names = list(dict.fromkeys(views))
    if not names:
        return {}
    select = prepare(session, PointerTables(keyspace).select_speed_versions)
    found = {row.view_name: row.version or 0 for row in session.execute(select, (names,))}
    return {name: found.get(name, 0) for name in names}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def read_watermarks(
    cassandra: CassandraSettings, views: Iterable[str], *, session: Any = None
) -> dict[str, datetime]:
    """Per view the speed layer ever recorded progress for, its watermark (UTC).

    The speed layer counts an event only if its event time is at or after the
    watermark, which only moves forward within a run (it lives in the job's
    checkpoint, so a stopped job resumes from it). A row without a watermark
    reads as the epoch: that job may still count an event of any time. A view
    without a row is left out (no speed layer ever ran for it).

    Reads with ``session`` when given, else on a connection of its own.
    """
    if session is None:
        from core.cassandra import connect

        cluster, own = connect(cassandra)
        try:
            return read_watermarks(cassandra, views, session=own)
        finally:
            cluster.shutdown()
    progress = read_speed_progress(session, cassandra.keyspace, views)
    return {name: row.watermark for name, row in progress.items()}


@dataclass(frozen=True)
class SpeedProgress:
    """What the speed layer last recorded for a view (``speed_progress``)."""

    watermark: datetime
    """As :func:`read_watermarks` reads it (the epoch when none)."""
    written_at: datetime | None
    """When the last micro-batch that had rows finished writing them (None: none yet). It
    is recorded after the batch's rows are written, so the speed rows read after this value
    was read hold every row written before it."""
    run_generation: int | None
    """The run that recorded it (a replay's switch makes another run the live one)."""


def read_speed_progress(
    session: Any, keyspace: str, views: Iterable[str]
) -> dict[str, SpeedProgress]:
    """Per view the speed layer ever recorded progress for, its :class:`SpeedProgress`; a
    view without a row is left out. Read before the speed rows, the same value read again
    later means no micro-batch finished writing rows in between."""
    from core.cassandra import prepare

    names = list(dict.fromkeys(views))
    if not names:
        return {}
    columns = ("watermark", "written_at", "run_generation")
    select = prepare(session, PointerTables(keyspace).select_progress_of(columns))
    return {
        row.view_name: SpeedProgress(
            _utc(row.watermark) or _EPOCH, _utc(row.written_at), row.run_generation
        )
        for row in session.execute(select, (names,))
    }


def read_live_floor(session: Any, keyspace: str, checkpoint_name: str) -> datetime | None:
    """The floor of the speed layer's live run: the newest run in state ``live`` (or recorded
    before states existed), as ``speed_layer.start.current_start`` picks it. Windows before
    the floor are not the live run's to write; None: it writes every window. A run a switch
    is making live (``switching``) is the live run already."""
    from core.cassandra import prepare

    select = prepare(session, PointerTables(keyspace).select_runs)
    for row in session.execute(select, (checkpoint_name,)):  # newest first
        if row.state in (None, "live", "switching"):
            return _utc(row.floor)
    return None


def read_reconcile_results(
    session: Any, keyspace: str, views: Iterable[str]
) -> dict[str, dict[str, Any] | None]:
    """Per view name, its last reconciliation as :data:`RECONCILE_COLUMNS` (timestamps in
    epoch ms), or None when it was never reconciled."""
    from core.cassandra import prepare

    select = prepare(session, PointerTables(keyspace).select_reconcile)
    out: dict[str, dict[str, Any] | None] = {}
    for name in views:
        row = session.execute(select, (name,)).one()
        out[name] = None if row is None else dict(zip(RECONCILE_COLUMNS, row, strict=True))
    return out
