"""The merged serving views in Spark SQL, for analysts.

:func:`register_views` registers, per view ``v``, three temporary views:

- ``gold_v``: the exact batch view, the Delta gold table the batch layer writes;
- ``speed_v``: the speed view's rows from Cassandra for a range (default: from
  the boundary, never before the speed rows' lifetime, to now), read
  one window partition at a time (never a table scan);
- ``serving_v``: what the serving API answers, as rows: ``gold_v`` before the
  view's batch boundary plus ``speed_v`` at or after it, with a ``final``
  column (true for batch rows).

and ``serving_boundaries`` (view, boundary). Rows are partials, so merge
them with Spark's own aggregates: ``sum`` for counts, ``max``,
``hll_union_agg`` + ``hll_sketch_estimate`` for distinct counts,
``kll_merge_agg_double`` + ``kll_sketch_get_quantile_double`` for quantiles::

    SELECT path, sum(page_views) AS views,
           hll_sketch_estimate(hll_union_agg(visitors)) AS visitors,
           kll_sketch_get_quantile_double(kll_merge_agg_double(load_sketch), 0.95) AS p95_ms
    FROM serving_page_activity
    WHERE window_start >= timestamp'2024-01-01 00:00:00'
    GROUP BY path ORDER BY views DESC LIMIT 10

Gold is the lake's current version; it can be newer than the published batch
rows the API reads (a run whose gate has not passed yet), never older.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.frames import local_frame
from core.settings import Settings
from layout import ViewTables, read_boundaries, read_speed_versions
from serving.timerange import MINUTE_MS, from_ms, to_ms
from views import ViewSpec
from views.kinds import kind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "FinalRows",
    "SpeedRows",
    "gold_frame",
    "read_speed_rows",
    "register_views",
    "row_minute",
    "rows_since",
    "speed_frame",
    "speed_rows",
    "view_schema",
]


def view_schema(spec: ViewSpec) -> StructType:
    """The Spark schema of a view's rows: ``window_start``, keys, measures."""
    from pyspark.sql.types import StructType

    schema = StructType().add("window_start", "timestamp")
    for key in spec.keys:
        schema = schema.add(key, "string")
    for m in spec.measures:
        schema = schema.add(m.name, kind(m.kind).spark_type)
    return schema


def gold_frame(spark: SparkSession, settings: Settings, spec: ViewSpec) -> DataFrame:
    """The gold Delta table of ``spec`` (its columns only), or no rows before gold ever ran."""
    from layout.lake import gold_path

    path = gold_path(settings, spec)
    try:
        return spark.read.format("delta").load(path).select(*spec.columns)
    except Exception as error:  # AnalysisException: not a Delta table (yet)
        if "DELTA_MISSING_DELTA_TABLE" not in str(error) and "not a Delta table" not in str(error):
            raise
        return local_frame(spark, [], view_schema(spec))


def first_speed_window(boundary: int | None, now: int, ttl_s: int) -> int:
    """The first window (epoch ms) whose speed rows a reader asks for: the boundary, but
    never before the speed rows' lifetime (older ones have expired). A view the batch layer
    held at the epoch (its speed layer had counted nothing yet) would otherwise be read
    minute by minute since 1970.

    >>> day = 86_400_000
    >>> first_speed_window(None, 10 * day, 3 * 86_400) == 7 * day
    True
    >>> first_speed_window(0, 10 * day, 3 * 86_400) == 7 * day
    True
    >>> first_speed_window(9 * day, 10 * day, 3 * 86_400) == 9 * day
    True
    """
    oldest = now - ttl_s * 1000
    return oldest if boundary is None else max(boundary, oldest)


def speed_rows(settings: Settings, spec: ViewSpec, lo: int, hi: int) -> list[tuple[Any, ...]]:
    """Speed rows of windows ``[lo, hi)`` read from Cassandra, one window partition each, in
    the version of the speed tables ``speed_versions`` names: ``(window_start, *keys,
    *measures)`` with ``window_start`` an aware UTC datetime."""
    return read_speed_rows(settings, spec, lo, hi)[1]


def read_speed_rows(
    settings: Settings, spec: ViewSpec, lo: int, hi: int, *, session: Any = None
) -> tuple[int, list[tuple[Any, ...]]]:
    """:func:`speed_rows` and the version of the speed tables they were read from; on
    ``session`` when given, else on a connection of its own."""
    from cassandra.concurrent import execute_concurrent_with_args

    from core.cassandra import connect, prepare

    if session is None:
        cluster, own = connect(settings.cassandra, schema=False)  # no metadata needed
        try:
            return read_speed_rows(settings, spec, lo, hi, session=own)
        finally:
            cluster.shutdown()
    first = -(-lo // MINUTE_MS) * MINUTE_MS
    minutes = [(m,) for m in range(first, hi, MINUTE_MS)]
    rows: list[tuple[Any, ...]] = []
    keyspace = settings.cassandra.keyspace
    (version,) = read_speed_versions(session, keyspace, [spec.name]).values()
    tables = ViewTables(spec, keyspace, "speed", table_version=version)
    select = prepare(session, tables.select_minute([m.name for m in spec.measures]))
    results = execute_concurrent_with_args(
        session, select, minutes, concurrency=128, raise_on_first_error=True
    )
    for (minute,), (ok, result) in zip(minutes, results, strict=True):
        if not ok:
            raise result
        start = from_ms(minute)  # aware: Spark reads naive datetimes as local time
        rows += [(start, *row) for row in result]
    return version, rows


def row_minute(row: tuple[Any, ...]) -> int:
    """The window start (epoch ms) of a speed row, its first value (ms or a datetime)."""
    start = row[0]
    return start if isinstance(start, int) else to_ms(start)


@dataclass(frozen=True)
class FinalRows:
    """Speed rows already read that can no longer change: those of the minutes before
    ``until``, in speed tables ``version``."""

    version: int
    until: int
    rows: tuple[tuple[Any, ...], ...] = ()


def rows_since(
    read: Callable[[int, int], tuple[int, list[tuple[Any, ...]]]],
    final: FinalRows | None,
    lo: int,
    hi: int,
    watermark: int,
) -> tuple[list[tuple[Any, ...]], FinalRows]:
    """Speed rows of ``[lo, hi)``: ``final``'s rows kept, the minutes after them read
    (``read(lo, hi) -> (version, rows)``); and what the next call may keep.

    The speed layer counts an event only at or after its watermark, which only moves
    forward within a run, so a minute that ended a minute before ``watermark`` (ms, read
    before the rows) no longer changes. A new version of the speed tables (a replay's
    switch) is read whole, and kept from the call after, when its watermark is its own.

    >>> rows = {0: [(0, "a")], 60_000: [(60_000, "b")], 120_000: [(120_000, "c")]}
    >>> def read(lo, hi):
    ...     print("read", lo, hi)
    ...     return 1, [r for m in range(lo, hi, 60_000) for r in rows.get(m, [])]
    >>> got, final = rows_since(read, None, 0, 180_000, watermark=150_000)
    read 0 180000
    >>> final
    FinalRows(version=1, until=60000, rows=((0, 'a'),))
    >>> rows_since(read, final, 0, 180_000, watermark=150_000)[0]
    read 60000 180000
    [(0, 'a'), (60000, 'b'), (120000, 'c')]
    """

    start = lo if final is None else max(lo, final.until)
    version, fresh = read(start, hi)
    if final is not None and final.version != version:
        if start > lo:
            version, fresh = read(lo, hi)
        return fresh, FinalRows(version, lo)
    kept = [r for r in final.rows if row_minute(r) >= lo] if final else []
    rows = kept + fresh
    closed = watermark // MINUTE_MS * MINUTE_MS - MINUTE_MS
    until = max(closed, final.until if final else lo)
    return rows, FinalRows(version, until, tuple(r for r in rows if row_minute(r) < until))


class SpeedRows:
    """One view's speed rows across a server's refreshes, read only where they can have
    changed (:meth:`rows`); :attr:`reads` and :attr:`kept` count the refreshes that read
    and those that did not need to; :attr:`changed` says whether the last call's rows may
    differ from those of the call :meth:`shown` was last called after."""

    def __init__(self) -> None:
        self.reads = 0
        self.kept = 0
        self.changed = True
        self._final: FinalRows | None = None
        self._last: tuple[Hashable, int, list[tuple[Any, ...]]] | None = None
        self._range = (0, 0)
        self._shown: tuple[int, int, int] | None = None

    def shown(self) -> None:
        """The last call's rows are what readers see now (:attr:`changed` compares with them)."""
        self._shown = (self.reads, *self._range)

    def rows(
        self,
        read: Callable[[int, int], tuple[int, list[tuple[Any, ...]]]],
        mark: Hashable,
        watermark: int,
        lo: int,
        hi: int,
        ahead: int = 0,
    ) -> list[tuple[Any, ...]]:
        """The rows of ``[lo, hi)``.

        ``mark`` is what was read of the speed layer's progress (and the speed tables'
        version) before the rows. A micro-batch's progress is recorded after its rows are
        written, so the same mark as at the last read means no row was written since:
        nothing is read, the last rows are kept. Otherwise the minutes ``watermark`` had not
        closed are read (:func:`rows_since`) up to ``hi + ahead``: a row written before the
        mark was read starts at most ``ahead`` (the speed layer's future tolerance) after
        now, so what is kept holds every row a later ``hi`` reaches. A range that starts
        earlier than the last one read is read whole.

        >>> written = {0: [(0, "a")], 60_000: [(60_000, "b")]}
        >>> def read(lo, hi):
        ...     print("read", lo, hi)
        ...     return 1, [r for m in range(lo, hi, 60_000) for r in written.get(m, [])]
        >>> speed = SpeedRows()
        >>> speed.rows(read, "batch 7", watermark=0, lo=0, hi=60_000, ahead=60_000)
        read 0 120000
        [(0, 'a')]
        >>> speed.shown()
        >>> speed.rows(read, "batch 7", watermark=0, lo=0, hi=120_000, ahead=60_000)
        [(0, 'a'), (60000, 'b')]
        >>> speed.reads, speed.kept, speed.changed
        (1, 1, True)
        >>> speed.shown()
        >>> speed.rows(read, "batch 7", watermark=0, lo=0, hi=120_000, ahead=60_000)
        [(0, 'a'), (60000, 'b')]
        >>> speed.changed
        False
        """
        last, shown = self._last, self._shown
        if last is not None and lo < last[1]:
            self._final = last = None
        self._range = (lo, hi)
        if last is not None and last[0] == mark:
            self.kept += 1
            minutes = [row_minute(r) for r in last[2]]
            self.changed = (
                shown is None
                or shown[0] != self.reads
                or any(shown[1] <= m < lo or shown[2] <= m < hi for m in minutes)
            )
            return [r for r, m in zip(last[2], minutes, strict=True) if lo <= m < hi]
        fresh, self._final = rows_since(read, self._final, lo, hi + ahead, watermark)
        self.reads += 1
        self.changed = True
        self._last = (mark, lo, fresh)
        return [r for r in fresh if lo <= row_minute(r) < hi]


def speed_frame(
    spark: SparkSession, settings: Settings, spec: ViewSpec, lo: int, hi: int
) -> DataFrame:
    """:func:`speed_rows` as a DataFrame of :func:`view_schema`."""
    return local_frame(spark, speed_rows(settings, spec, lo, hi), view_schema(spec))


def register_views(
    spark: SparkSession,
    settings: Settings,
    *,
    speed_start: datetime | None = None,
    speed_end: datetime | None = None,
    views: Sequence[ViewSpec] | None = None,
) -> dict[str, datetime | None]:
    """Register ``gold_<v>``, ``speed_<v>``, ``serving_<v>`` and ``serving_boundaries``.

    The speed rows are read once, for windows from ``speed_start`` (default:
    :func:`first_speed_window`) to ``speed_end``
    (default: now); register again to see newer ones. Returns each view's
    boundary. ``views``: those of every declared pipeline unless named.
    """
    from pyspark.sql import functions as F

    if views is None:
        from pipelines import declared_views

        views = declared_views()
    published = read_boundaries(settings.cassandra, [spec.name for spec in views])
    boundaries = {name: to_ms(b.at) if b else None for name, b in published.items()}
    now, ttl_s = int(time.time() * 1000), settings.speed.ttl_s
    for spec in views:
        boundary = boundaries[spec.name]
        lo = to_ms(speed_start) if speed_start else first_speed_window(boundary, now, ttl_s)
        hi = to_ms(speed_end) if speed_end else now + MINUTE_MS
        gold = gold_frame(spark, settings, spec)
        speed = speed_frame(spark, settings, spec, lo, hi)
        gold.createOrReplaceTempView(f"gold_{spec.name}")
        speed.createOrReplaceTempView(f"speed_{spec.name}")
        if boundary is None:
            merged = speed.withColumn("final", F.lit(False))
        else:
            cut = F.lit(from_ms(boundary)).cast("timestamp")
            before = gold.where(F.col("window_start") < cut).withColumn("final", F.lit(True))
            after = speed.where(F.col("window_start") >= cut).withColumn("final", F.lit(False))
            merged = before.unionByName(after)
        merged.createOrReplaceTempView(f"serving_{spec.name}")
    named = {name: (from_ms(b) if b is not None else None) for name, b in boundaries.items()}
    local_frame(
        spark, list(named.items()), "view_name string, boundary timestamp"
    ).createOrReplaceTempView("serving_boundaries")
    return named
