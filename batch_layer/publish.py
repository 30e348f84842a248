"""Publish: load validated gold days into Cassandra and move the batch boundary.

Why Cassandra and not Delta for serving: a dashboard's question ("this page,
the last hour, per minute") must answer in milliseconds at high request
rates; a Delta read costs a Spark job or a log replay per query. So, as the
classic Lambda loads batch views into its serving store, publish copies each
validated gold day into the batch tables of :mod:`layout.views`, next
to the speed tables, with the same partition design. Analysts keep Delta
(gold) for SQL; serving reads Cassandra only.

The switch is atomic per day and never shows half a day:

1. every row of the day is written under a new ``version`` (a fresh partition
   nobody reads yet), with the day's rollups: its hour and day rows, each the
   merge of the gold minute rows it covers (:func:`views.merge.merge_partials`,
   the views' own merge rules), into the rollup tables of
   :attr:`layout.views.ViewTables.grain`, under the same version;
2. ``batch_days(view, day)`` is pointed at the new version (the old one is
   recorded in ``batch_superseded`` for the maintenance DAG to delete later);
3. ``batch_boundary(view)`` moves forward to the end of the newest complete
   period: ``floor(as_of - lateness, period)``, where ``as_of`` is when
   bronze fixed the end of the log gold was computed from, but never past
   ``floor(speed watermark, period)``, the speed layer's watermark for the
   view that bronze read just before fixing that end.

Why the watermark: the speed layer counts every event at or after its
watermark, and serving reads windows before the boundary from batch only.
An event that reached Kafka after bronze's end, later than ``lateness`` but
not later than the watermark, is counted by the speed layer and not by this
publish; with the boundary past its window it would be hidden until the next
run. Every such event reaches the speed layer when its watermark is at least
the one bronze read (it only moves forward, and persists in the job's
checkpoint, so a stopped job resumes from it), so its window is at or after
the boundary: nothing the speed layer counted is ever hidden. A view the
speed layer never recorded progress for keeps the ``as_of`` rule. A view whose
speed layer has counted no event yet (its watermark is still the epoch, which
would hold the boundary at 1970) and that has no boundary gets none: nothing
is final yet, and readers keep reading it from the speed rows alone.

Publish loads the gold runs no publish consumed (by ledger entry id), only
once the latest gold gate checked and passed exactly those; otherwise it
raises and the boundary stays where it was.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from batch_layer.bronze import bronze_path, speed_watermarks
from batch_layer.gold import gold_path, require_gate
from batch_layer.ledger import Entry, Ledger, pending
from core.cassandra import execute_all, process_session, view_row_values
from core.log import get_logger, log_event
from core.settings import CassandraSettings, Settings
from layout import GRAINS, PointerTables, ViewTables, read_boundaries
from pipelines import PipelineSpec
from views.merge import merge_partials

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

    from views.spec import ViewSpec

__all__ = ["PublishRun", "boundary_for", "held_to_watermark", "publish"]

_log = get_logger(__name__)

_NO_WATERMARK = datetime(1970, 1, 1, tzinfo=UTC)
"""The watermark a speed layer reports before it has counted an event (Spark's initial one)."""


@dataclass(frozen=True)
class PublishRun:
    version: int
    days: tuple[date, ...]
    boundaries: dict[str, datetime | None]
    """Per view, the boundary after the run."""
    rows: dict[str, int]


def boundary_for(as_of: datetime, lateness_s: int, period: str) -> datetime:
    """The end of the newest period complete at ``as_of``, allowing ``lateness_s``.

    >>> t = datetime(2024, 5, 1, 10, 7, 30, tzinfo=UTC)
    >>> boundary_for(t, 300, "hour").isoformat()
    '2024-05-01T10:00:00+00:00'
    >>> boundary_for(t, 600, "hour").isoformat()
    '2024-05-01T09:00:00+00:00'
    >>> boundary_for(t, 60, "minute").isoformat()
    '2024-05-01T10:06:00+00:00'
    >>> boundary_for(t, 0, "day").isoformat()
    '2024-05-01T00:00:00+00:00'

    Periods are UTC periods (serving's windows and days are UTC): ``as_of``
    in another zone is converted first, and a naive one is refused.
    """
    if as_of.tzinfo is None:
        raise ValueError(f"as_of {as_of.isoformat()} has no time zone; pass an aware datetime.")
    return _period_start(as_of.astimezone(UTC) - timedelta(seconds=lateness_s), period)


def held_to_watermark(boundary: datetime, watermark: datetime | None, period: str) -> datetime:
    """``boundary``, held back to the start of the period holding the speed ``watermark``.

    >>> b = datetime(2024, 5, 1, 10, tzinfo=UTC)
    >>> held_to_watermark(b, datetime(2024, 5, 1, 9, 53, 20, tzinfo=UTC), "minute").isoformat()
    '2024-05-01T09:53:00+00:00'
    >>> held_to_watermark(b, datetime(2024, 5, 1, 9, 53, 20, tzinfo=UTC), "hour").isoformat()
    '2024-05-01T09:00:00+00:00'
    >>> held_to_watermark(b, datetime(2024, 5, 1, 10, 20, tzinfo=UTC), "hour").isoformat()
    '2024-05-01T10:00:00+00:00'
    >>> held_to_watermark(b, None, "hour").isoformat()  # no speed layer
    '2024-05-01T10:00:00+00:00'

    The speed layer counts events at or after its watermark; their windows
    start at or after the held boundary, so serving reads them from speed.
    """
    if watermark is None:
        return boundary
    return min(boundary, _period_start(watermark, period))


def _period_start(t: datetime, period: str) -> datetime:
    """The start of the UTC ``period`` holding ``t`` (aware)."""
    if t.tzinfo is None:
        raise ValueError(f"{t.isoformat()} has no time zone; pass an aware datetime.")
    t = t.astimezone(UTC)
    if period == "minute":
        return t.replace(second=0, microsecond=0)
    if period == "hour":
        return t.replace(minute=0, second=0, microsecond=0)
    if period == "day":
        return t.replace(hour=0, minute=0, second=0, microsecond=0)
    raise ValueError(f"Unknown period {period!r}: minute, hour or day.")


def _write_rows(
    rows: Iterable[Row], tables: dict[str, ViewTables], cassandra: CassandraSettings, version: int
) -> Iterator[tuple[date, int]]:
    """Write rows of every grain (their ``grain`` column) under ``version`` into both batch
    tables of that grain (on an executor); yield how many minute rows each day had."""
    session = process_session(cassandra)
    spec = next(iter(tables.values())).spec
    measures = [m.name for m in spec.measures]
    statements = {
        grain: (session.prepare(t.insert_by_key()), session.prepare(t.insert_by_minute()))
        for grain, t in tables.items()
    }
    bound: dict[str, tuple[list, list]] = {grain: ([], []) for grain in tables}
    per_day: Counter[date] = Counter()
    for row in rows:
        start, key_values, values = view_row_values(row, spec.keys, measures)
        by_key_row, by_minute_row = tables[row["grain"]].bind(
            start, key_values, values, version=version
        )
        key_rows, minute_rows = bound[row["grain"]]
        key_rows.append(by_key_row)
        minute_rows.append(by_minute_row)
        if row["grain"] == "minute":
            per_day[start.date()] += 1
    for grain, (by_key, by_minute) in statements.items():
        execute_all(session, by_key, bound[grain][0])
        execute_all(session, by_minute, bound[grain][1])
    yield from per_day.items()


def _all_grains(chosen: DataFrame, view: ViewSpec) -> DataFrame:
    """The gold minute rows and their hour and day merges, in one frame with a ``grain``
    column: one Spark job writes every grain of the view."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = [
        (chosen if grain == "minute" else merge_partials(chosen, view, period=grain))
        .select(*view.columns)
        .withColumn("grain", F.lit(grain))
        for grain in GRAINS
    ]
    return reduce(lambda a, b: a.unionByName(b), frames)


def publish(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> PublishRun:
    """Load the gold days not yet published, switch them on, move the boundary."""
    from pyspark.sql import functions as F

    from core.cassandra import connect

    ledger = Ledger(spark, settings, spec)
    entries = ledger.entries()
    golds = [e for e in entries if e.step == "gold"]
    if not golds:
        log_event(_log, "publish.nothing", pipeline=spec.name, reason="gold never ran")
        return PublishRun(0, (), {}, {})
    work = pending(entries, "gold", "publish")
    days = tuple(sorted({day for e in work for day in e.days}))
    if days:
        require_gate(entries, "gold", "gold")
    as_of = max((e.as_of for e in golds if e.as_of), default=None)
    watermarks = speed_watermarks(spark, bronze_path(settings, spec), as_of) if as_of else {}
    # The views whose speed watermark held them back.
    held: dict[str, dict[str, datetime | None]] = {}
    version = int(datetime.now(UTC).timestamp() * 1000)
    keyspace = settings.cassandra.keyspace
    cassandra = settings.cassandra
    rows: dict[str, int] = {}
    cluster, session = connect(cassandra)
    try:
        pointers = PointerTables(keyspace)
        current_day = session.prepare(pointers.select_days)
        set_day = session.prepare(pointers.insert_day)
        supersede = session.prepare(pointers.insert_superseded)
        set_boundary = session.prepare(pointers.insert_boundary)
        published = read_boundaries(cassandra, spec.views, session=session)
        boundaries: dict[str, datetime | None] = {}
        for view in spec.view_specs:
            if days:
                gold = spark.read.format("delta").load(gold_path(settings, view))
                chosen = gold.where(F.col("window_date").isin(list(days)))
                tables = {g: ViewTables(view, keyspace, "batch", grain=g) for g in GRAINS}

                def write(part: Iterable[Row], tables: dict = tables) -> Iterator[tuple]:
                    return _write_rows(part, tables, cassandra, version)

                per_day: Counter[date] = Counter()
                for day, n in _all_grains(chosen, view).rdd.mapPartitions(write).collect():
                    per_day[day] += n
                old = {r.day.date(): r.version for r in session.execute(current_day, (view.name,))}
                now = datetime.now(UTC)
                for day in days:
                    if day in old:
                        session.execute(supersede, (view.name, day, old[day], now))
                    session.execute(
                        set_day, (view.name, day, version, per_day.get(day, 0), now, True)
                    )
                rows[view.name] = sum(per_day.values())
            previous = published[view.name] and published[view.name].at
            boundary = previous
            if as_of is not None:
                period = settings.batch.period
                candidate = boundary_for(as_of, settings.batch.lateness_s, period)
                watermark = watermarks.get(view.name)
                boundary = held_to_watermark(candidate, watermark, period)
                boundary = max(boundary, previous) if previous else boundary
                if not previous and watermark is not None and watermark <= _NO_WATERMARK:
                    boundary = None  # held at the epoch: none yet, rather than one of 1970
                else:
                    session.execute(
                        set_boundary, (view.name, boundary, version, run_id, datetime.now(UTC))
                    )
                if watermark is not None and (boundary is None or boundary < candidate):
                    held[view.name] = {
                        "speed_watermark": watermark,
                        "as_of_rule": candidate,
                        "boundary": boundary,
                    }
            boundaries[view.name] = boundary
    finally:
        cluster.shutdown()
    ledger.append(
        Entry(
            "publish",
            run_id,
            datetime.now(UTC),
            days,
            as_of,
            detail={"version": version, "rows": rows, "boundaries": boundaries}
            | ({"held_by_speed": held} if held else {}),
            consumed=tuple(e.entry_id for e in work),
        )
    )
    if held:
        log_event(
            _log,
            "publish.boundary_held",
            pipeline=spec.name,
            run_id=run_id,
            why="the speed layer counts events at or after its watermark; a boundary past it "
            "would hide those that arrived after bronze's end until the next run",
            views={
                name: {k: v.isoformat() if v else None for k, v in h.items()}
                for name, h in held.items()
            },
        )
    log_event(
        _log,
        "publish.done",
        pipeline=spec.name,
        run_id=run_id,
        version=version,
        days=[d.isoformat() for d in days],
        rows=rows,
        boundaries={k: v.isoformat() if v else None for k, v in boundaries.items()},
    )
    return PublishRun(version, days, boundaries, rows)
