"""Fold each micro-batch's view partials into Cassandra, exactly once, on the executors.

The speed layer is one streaming query (:func:`speed_layer.job.start_queries`):
it reads, parses and deduplicates the events once, and ``foreachBatch`` hands
each micro-batch's new events to :class:`ViewsSink`. There every view's own
build function aggregates the batch into *partial* rows, one per (window,
key), and each partial is folded into the row Cassandra holds, with the
view's merge rules (:attr:`views.kinds.Kind.merge`: counts and sums add,
maxima take the larger, sketches union). The row is written back whole: an
absolute value, never a counter increment.

The row carries the write that made it, ``(run_id, batch_id)``: the
**fence** that makes the fold exactly once (:func:`fold`). Batch ids count
the micro-batches of one checkpoint, so the run is the streaming query's
id, which Spark generates when it creates a checkpoint and keeps in it: a
restart from the checkpoint is the same run, and a checkpoint lost and
created again at the same path, whose batch ids start at 0 again, is a new
one (:class:`Writer`). Spark replays a micro-batch whose commit did not
reach the checkpoint (a crash between the write and the commit) with the
same offsets and the same deduplication state, so with the same partials; a
row whose fence is already at that batch holds its partial and is left as it
is. Both tables of a view get the same value: the by-key table is written
first, then the by-minute table, whose row is the one read back; a crash
between the two leaves the by-minute row unfenced, so the replay folds from
it again and rewrites both with the same value. A row another run wrote (the
run before ``python -m speed_layer reset``, a lost checkpoint's, or a job
before the fence existed) is replaced, not added to: a run writes only
windows it sees whole (:mod:`speed_layer.start`), so its first partial of a
window is all of the window it has seen. Rows also carry the checkpoint's
number (:func:`checkpoint_id`): a row written before rows carried their run
is fenced by it, as it was then.

The fold's reads and writes run at ``LOCAL_QUORUM`` (:mod:`layout.consistency`):
on a replicated store a read at a lower level may miss the previous batch's
write, and the fold would then overwrite its counts or add a replayed batch
again.

Where the fold runs follows the views' partitions (``speed.state_partitions``,
unless ``speed.fold`` says). With one, as on a machine of a few cores, the
partials are collected and folded on the driver, a thread per view: a
partition's fold is one Python loop wherever it runs, and on the driver it
holds no task slot while Cassandra answers and needs no Python worker (a
micro-batch's fold of four views: 1.48 s -> 0.98 s, docs/benchmarks.md).
With several, the rows never travel to the driver: ``foreachPartition``
folds each partition on the executors, each of which keeps one Cassandra
session per Python worker process (Spark reuses its Python workers). Either
way the rows are read and written with prepared statements, many in flight
at once, under the same fence.
"""

from __future__ import annotations

import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.cassandra import execute_all, prepare, process_session, view_row_values
from core.log import get_logger, log_event
from core.settings import CassandraSettings
from layout import ViewTables
from speed_layer.forgotten import without_forgotten
from views.kinds import kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row

__all__ = [
    "QUERY_ID_PROPERTY",
    "Fence",
    "ViewsSink",
    "Writer",
    "checkpoint_id",
    "fold",
    "fold_rows",
    "write_rows",
]

_log = get_logger(__name__)

QUERY_ID_PROPERTY = "sql.streaming.queryId"
"""The Spark local property holding the id of the streaming query running a micro-batch."""

Fence = tuple[Any, int]
"""``(run, batch_id)``: the micro-batch of a run that last wrote a row."""


def checkpoint_id(checkpoint: str) -> int:
    """A checkpoint location as a 32-bit number (CRC-32 of the path), kept in every row.

    >>> checkpoint_id("s3a://lake/checkpoints/speed/views")
    753739784
    """
    return zlib.crc32(checkpoint.encode()) & 0x7FFFFFFF


@dataclass(frozen=True)
class Writer:
    """The micro-batch writing rows: its run, its batch id and its checkpoint's number.

    >>> run = uuid.UUID(int=7)
    >>> w = Writer(run, 4, checkpoint=12)
    >>> w.fence == (run, 4)
    True
    >>> w.stored_fence(run_id=uuid.UUID(int=8), checkpoint=12, batch_id=9)[0] == run
    False
    >>> w.stored_fence(run_id=None, checkpoint=12, batch_id=3) == (run, 3)  # an older row
    True
    >>> w.stored_fence(run_id=None, checkpoint=5, batch_id=3)
    (None, 3)
    """

    run: uuid.UUID
    """The streaming query's id: new with every checkpoint, kept across its restarts."""
    batch_id: int
    checkpoint: int
    """:func:`checkpoint_id` of the checkpoint's location."""

    @property
    def fence(self) -> Fence:
        return (self.run, self.batch_id)

    def stored_fence(self, run_id: Any, checkpoint: Any, batch_id: Any) -> Fence:
        """The fence of a stored row, as :func:`fold` compares it with :attr:`fence`.

        A row written before rows carried their run (``run_id`` null) and by this
        checkpoint is this run's: the job that wrote it resumed from the same checkpoint.
        """
        if run_id is None and checkpoint is not None and checkpoint == self.checkpoint:
            return (self.run, batch_id)
        return (run_id, batch_id)


def fold(
    kinds: Sequence[str],
    partial: Sequence[Any],
    stored: Sequence[Any] | None,
    stored_fence: tuple[int | None, int | None] | None,
    fence: Fence,
) -> list[Any] | None:
    """The measure values to write for one row, or None when the stored row already has them.

    ``partial``: the micro-batch's values (one per measure, of ``kinds``);
    ``stored`` and ``stored_fence``: the row Cassandra holds and the write that
    made it (None: no row).

    >>> kinds = ("count", "max")
    >>> fold(kinds, [3, 5.0], None, None, (7, 4))              # a new row
    [3, 5.0]
    >>> fold(kinds, [3, 5.0], [10, 9.0], (7, 3), (7, 4))       # an earlier batch's row
    [13, 9.0]
    >>> fold(kinds, [3, 5.0], [13, 9.0], (7, 4), (7, 4)) is None  # batch 4 replayed
    True
    >>> fold(kinds, [3, 5.0], [10, 9.0], (7, 40), (8, 0))      # another run's row
    [3, 5.0]
    >>> fold(kinds, [3, 5.0], [10, 9.0], (None, 12), (7, 0))   # a row without a run
    [3, 5.0]
    """
    run, batch_id = fence
    if stored is None or stored_fence is None or stored_fence[0] != run:
        return list(partial)
    stored_batch = stored_fence[1]
    if stored_batch is not None and stored_batch >= batch_id:
        return None
    pairs = zip(kinds, stored, partial, strict=True)
    return [kind(k).merge_stored([old, new]) for k, old, new in pairs]


def _bind_all(
    tables: ViewTables,
    rows: Iterable[tuple[datetime, list[Any], list[Any]]],
    batch_id: int,
    checkpoint: int,
    run: uuid.UUID | None,
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    written_by = (batch_id, datetime.now(UTC), checkpoint, run)
    bound = [
        tables.bind(start, keys, values, written_by=written_by) for start, keys, values in rows
    ]
    return [by_key for by_key, _ in bound], [by_minute for _, by_minute in bound]


def _write(
    session: Any,
    tables: ViewTables,
    rows: list,
    written_by: tuple[int, int, uuid.UUID | None],
    concurrency: int,
) -> int:
    key_rows, minute_rows = _bind_all(tables, rows, *written_by)
    # The by-minute row is the one read back: written last, it says the fold is done.
    execute_all(session, prepare(session, tables.insert_by_key()), key_rows, concurrency)
    execute_all(session, prepare(session, tables.insert_by_minute()), minute_rows, concurrency)
    return len(key_rows)


def fold_rows(
    rows: Iterable[Row],
    tables: ViewTables,
    cassandra: CassandraSettings,
    writer: Writer,
    concurrency: int = 64,
) -> int:
    """Fold one micro-batch's partial view rows into both tables of a view (:func:`fold`);
    return how many rows were written (a replayed batch writes none)."""
    session = process_session(cassandra)
    measures = [m.name for m in tables.spec.measures]
    kinds = [m.kind for m in tables.spec.measures]
    partials = [view_row_values(row, tables.spec.keys, measures) for row in rows]
    if not partials:
        return 0
    stored = _stored_rows(session, tables, sorted({start for start, _, _ in partials}), concurrency)
    folded = []
    for start, keys, values in partials:
        row = stored.get((start, *keys))
        old = None if row is None else [getattr(row, m) for m in measures]
        old_fence = (
            None
            if row is None
            else writer.stored_fence(row.run_id, row.checkpoint_id, row.batch_id)
        )
        merged = fold(kinds, values, old, old_fence, writer.fence)
        if merged is not None:
            folded.append((start, keys, merged))
    written_by = (writer.batch_id, writer.checkpoint, writer.run)
    return _write(session, tables, folded, written_by, concurrency)


def _stored_rows(
    session: Any, tables: ViewTables, windows: Sequence[datetime], concurrency: int
) -> dict[tuple[Any, ...], Any]:
    """The stored rows of ``windows``, by ``(window_start, *keys)``: one partition read per
    window (a micro-batch's partials of a window are most of its keys; a read per row cost a
    round trip each, and made a replay over a day of windows Cassandra-bound)."""
    from cassandra.concurrent import execute_concurrent_with_args

    select = prepare(session, tables.select_stored_window())
    keys = tables.spec.keys
    results = execute_concurrent_with_args(
        session, select, [(w,) for w in windows], concurrency=concurrency, raise_on_first_error=True
    )
    stored = {}
    for window, (ok, result) in zip(windows, results, strict=True):
        if not ok:
            raise result
        for row in result:  # pages beyond the first are fetched as the loop reaches them
            stored[(window, *(getattr(row, k) for k in keys))] = row
    return stored


def write_rows(
    rows: Iterable[Row],
    tables: ViewTables,
    cassandra: CassandraSettings,
    batch_id: int,
    run: int = 0,
    concurrency: int = 64,
) -> int:
    """Write view rows as they are (absolute values, no fold), from micro-batch ``batch_id``
    of checkpoint number ``run`` and no run id; for loading known rows (fixtures,
    benchmarks). Returns the rows written."""
    measures = [m.name for m in tables.spec.measures]
    values = [view_row_values(row, tables.spec.keys, measures) for row in rows]
    session = process_session(cassandra)
    return _write(session, tables, values, (batch_id, run, None), concurrency)


class ViewsSink:
    """The ``foreachBatch`` function of the speed layer's query: every view, one batch."""

    def __init__(
        self,
        tables: Sequence[ViewTables],
        cassandra: CassandraSettings,
        checkpoint: str,
        *,
        on_driver: bool = False,
        forgotten: Callable[[], frozenset[str]] | None = None,
        identity: Sequence[str] = (),
    ) -> None:
        self.tables = tuple(tables)
        self.cassandra = cassandra
        self.checkpoint = checkpoint_id(checkpoint)
        self.on_driver = on_driver
        """Fold on the driver (each view's partials are one partition), not the executors."""
        self.forgotten = forgotten
        """The digests of the people the pipeline no longer counts, now
        (:class:`speed_layer.forgotten.Forgotten`); their events, by the ``identity``
        fields, are left out of every view."""
        self.identity = tuple(identity)

    def writer(self, events: DataFrame, batch_id: int) -> Writer:
        """The writer of micro-batch ``batch_id``: its run is the id of the streaming query
        running it (Spark's local property :data:`QUERY_ID_PROPERTY`, set on the thread that
        calls ``foreachBatch``), the id Spark keeps in the query's checkpoint."""
        query_id = events.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
        if not query_id:
            raise RuntimeError(
                f"micro-batch {batch_id} carries no streaming query id (Spark's local property "
                f"{QUERY_ID_PROPERTY!r}), so its rows cannot be fenced by their run; ViewsSink "
                "runs as the foreachBatch function of a streaming query (speed_layer.job)."
            )
        return Writer(uuid.UUID(query_id), batch_id, self.checkpoint)

    def __call__(self, events: DataFrame, batch_id: int) -> None:
        """Fold the batch into every view, the views' Spark jobs side by side (threads).

        Logs ``speed.batch_folded``: the seconds to fold every view (``fold_s``: the
        batch's read, parse and dedupe, which the first view's job computes, then the
        aggregations, Cassandra reads and writes) and each view's share.
        """
        from concurrent.futures import ThreadPoolExecutor

        from pyspark import inheritable_thread_target

        cassandra, writer = self.cassandra, self.writer(events, batch_id)

        def fold_view(tables: ViewTables) -> float:
            def write_partition(rows: Iterator[Row]) -> None:
                fold_rows(rows, tables, cassandra, writer)

            started = time.monotonic()
            partials = tables.spec.build(events)
            if self.on_driver:
                write_partition(iter(partials.collect()))
            else:
                partials.foreachPartition(write_partition)
            return time.monotonic() - started

        if self.forgotten is not None:
            events = without_forgotten(events, self.forgotten(), self.identity)
        started = time.monotonic()
        events.persist()
        try:
            # No count first: the views' jobs compute the cached batch as they start (one
            # computes a partition, the others wait for it). A count before them showed where
            # the time goes but added ~0.35 s to every batch (docs/benchmarks.md).
            # inheritable_thread_target: each view's jobs keep this micro-batch's local
            # properties (its pipeline's scheduler pool, speed_layer.service).
            fold = inheritable_thread_target(events.sparkSession)(fold_view)
            with ThreadPoolExecutor(max_workers=len(self.tables)) as pool:
                running = {t.spec.name: pool.submit(fold, t) for t in self.tables}
                # The first failure fails the batch: its checkpoint commit never happens.
                seconds = {name: round(done.result(), 3) for name, done in running.items()}
        finally:
            events.unpersist()
        log_event(
            _log,
            "speed.batch_folded",
            batch_id=batch_id,
            run=str(writer.run),
            fold_s=round(time.monotonic() - started, 3),
            views=seconds,
        )
