"""The two Cassandra tables of a view in one layer, derived from its spec, and their statements.

Designed per query, so that a serving read is one partition slice:

- ``<layer>_<view>``: one partition per (keys, UTC day[, version]), rows
  clustered by ``window_start`` descending: a timeseries of one key over a
  range reads one partition per day, newest first.
- ``<layer>_<view>_by_minute``: one partition per (minute window[, version]),
  one row per key: "top N right now", or top N over a range, reads one
  partition per minute.

The batch layer also publishes each view's **rollups**, the same two tables
at the ``hour`` and ``day`` grain (:attr:`ViewTables.grain`:
``batch_<view>_hours`` / ``batch_<view>_by_hour``, ``batch_<view>_days`` /
``batch_<view>_by_day``), each row the merge of the minute rows it covers,
under the same day version; serving reads the coarsest grain that covers
each part of a range, so a month costs about 30 partitions, not 43,200.

The layers differ in three ways, all held by :data:`LAYERS`:

- **speed** rows are written as absolute values (upserts, never counter
  increments) with the micro-batch that wrote them (``run_id``,
  ``batch_id``, ``written_at``, ``checkpoint_id``): the fence that makes a
  replayed micro-batch a no-op (:mod:`speed_layer.sink`); they expire after ``ttl_s``
  (longer than the batch layer's delay: by then the batch view has replaced
  them), compacted by time window;
- **batch** rows are written under a new ``version`` per published day, in
  fresh partitions nobody reads until :mod:`layout.pointers` switches the day
  to them, so serving never sees a half loaded day;
- the speed layer's output is versioned by table (:attr:`ViewTables.table_version`):
  a Kappa replay writes ``speed_v<N>_<view>`` beside the live tables and
  serving switches to them through the ``speed_versions`` pointer
  (:mod:`layout.pointers`); version 0 is the unsuffixed ``speed_<view>``.
  Tables, not a key column, because a new version may change a view's
  measures (new columns, other kinds) and the old one is dropped whole,
  without tombstones.

Column types come from each measure's kind (:func:`views.kinds.kind`), so the
two layers type every measure alike and serving merges their rows.

>>> from views.registry import view
>>> speed = ViewTables(view("clicks"), "ks", "speed")
>>> speed.by_key, speed.versioned
('ks.speed_clicks', False)
>>> ViewTables(view("clicks"), "ks", "speed", table_version=3).by_minute
'ks.speed_v3_clicks_by_minute'
>>> speed.select_minute(["clicks"])
'SELECT target, clicks FROM ks.speed_clicks_by_minute WHERE window_start = ?'
>>> ViewTables(view("clicks"), "ks", "batch").select_minute(["clicks"])
'SELECT target, clicks FROM ks.batch_clicks_by_minute WHERE window_start = ? AND version = ?'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from views.kinds import kind
from views.spec import ViewSpec

__all__ = ["GRAINS", "LAYERS", "Grain", "Layer", "LayerShape", "ViewTables", "view_tables"]

Layer = Literal["speed", "batch"]
Grain = Literal["minute", "hour", "day"]
GRAINS: tuple[Grain, ...] = ("minute", "hour", "day")
"""The window widths view rows exist at: the views' own 1-minute windows, and their
rollups (each the merge of the minute rows it covers, :func:`views.merge.merge_partials`)."""


@dataclass(frozen=True)
class LayerShape:
    """What a layer adds to every view table it writes."""

    versioned: bool
    """Default of :attr:`ViewTables.versioned`: a ``version`` in the partition keys."""
    written_by: tuple[tuple[str, str], ...] = ()
    """Columns after the measures saying which write a row came from (name, CQL type)."""
    optional_written_by: int = 0
    """How many of the last :attr:`written_by` columns a row may be written without (null):
    rows loaded as they are (fixtures, benchmarks) carry no run."""
    expires: bool = False
    """Rows expire after a TTL, with time-window compaction."""


LAYERS: dict[str, LayerShape] = {
    "speed": LayerShape(
        versioned=False,
        written_by=(
            ("batch_id", "bigint"),
            ("written_at", "timestamp"),
            ("checkpoint_id", "int"),
            ("run_id", "uuid"),
        ),
        optional_written_by=1,
        expires=True,
    ),
    "batch": LayerShape(versioned=True),
}
"""The layers that write view tables, by table prefix."""


def _columns(pairs: Sequence[tuple[str, str]]) -> str:
    return ", ".join(f"{name} {cql}" for name, cql in pairs)


def _equal(columns: Sequence[str]) -> str:
    return " AND ".join(f"{c} = ?" for c in columns)


@dataclass(frozen=True)
class ViewTables:
    """The by-key and by-minute tables of one view in one layer, and every statement on them."""

    spec: ViewSpec
    keyspace: str
    layer: Layer
    versioned: bool | None = None
    """A ``version`` in both partition keys; None: the layer's default (:data:`LAYERS`)."""
    table_version: int = 0
    """The output version these tables hold (a Kappa replay writes a new one); 0: the
    unsuffixed tables."""
    grain: Grain = "minute"
    """The width of the windows the rows hold: the view's minutes, or an hour or day
    rollup (``batch_<view>_hours`` / ``batch_<view>_by_hour``, same partitioning)."""

    def __post_init__(self) -> None:
        if self.layer not in LAYERS:
            raise ValueError(
                f"Unknown layer {self.layer!r} for view {self.spec.name!r}; "
                f"the layers are: {', '.join(LAYERS)}."
            )
        if self.versioned is None:
            object.__setattr__(self, "versioned", LAYERS[self.layer].versioned)
        if self.table_version < 0:
            raise ValueError(f"A table version is 0 or more; got {self.table_version}.")
        if self.grain not in GRAINS:
            raise ValueError(f"grain must be one of {', '.join(GRAINS)}; got {self.grain!r}.")

    @property
    def shape(self) -> LayerShape:
        return LAYERS[self.layer]

    @property
    def prefix(self) -> str:
        """``speed``, ``speed_v3``: what every table name of this layer and version starts with."""
        return self.layer if not self.table_version else f"{self.layer}_v{self.table_version}"

    @property
    def by_key(self) -> str:
        """One partition per (keys, day[, version]); ``<prefix>_<view>`` for minutes,
        ``<prefix>_<view>_hours`` / ``_days`` for the rollups."""
        grain = "" if self.grain == "minute" else f"_{self.grain}s"
        return f"{self.keyspace}.{self.prefix}_{self.spec.name}{grain}"

    @property
    def by_minute(self) -> str:
        """One partition per window (``_by_minute``, ``_by_hour``, ``_by_day``)."""
        return f"{self.keyspace}.{self.prefix}_{self.spec.name}_by_{self.grain}"

    def _version(self) -> list[str]:
        return ["version"] if self.versioned else []

    def _measures(self) -> list[str]:
        return [m.name for m in self.spec.measures]

    def _key_columns(self) -> list[str]:
        """Columns of the by-key table, in order."""
        written_by = [name for name, _ in self.shape.written_by]
        return [
            *self.spec.keys,
            "day",
            *self._version(),
            "window_start",
            *self._measures(),
            *written_by,
        ]

    def _minute_columns(self) -> list[str]:
        """Columns of the by-minute table, in order."""
        written_by = [name for name, _ in self.shape.written_by]
        return ["window_start", *self._version(), *self.spec.keys, *self._measures(), *written_by]

    def _types(self) -> dict[str, str]:
        return {
            **dict.fromkeys(self.spec.keys, "text"),
            "day": "date",
            "version": "bigint",
            "window_start": "timestamp",
            **{m.name: kind(m.kind).cql_type for m in self.spec.measures},
            **dict(self.shape.written_by),
        }

    def create(self, ttl_s: int | None = None) -> list[str]:
        """Both CREATE TABLE statements (idempotent); speed tables need ``ttl_s``."""
        if self.shape.expires and ttl_s is None:
            raise ValueError(f"The {self.layer} tables of {self.spec.name!r} need a ttl_s.")
        if not self.shape.expires and ttl_s is not None:
            raise ValueError(f"The {self.layer} rows of {self.spec.name!r} never expire; no ttl_s.")
        types = self._types()
        key_list = ", ".join(self.spec.keys)
        by_key = _columns([(c, types[c]) for c in self._key_columns()])
        by_minute = _columns([(c, types[c]) for c in self._minute_columns()])
        key_partition = ", ".join([*self.spec.keys, "day", *self._version()])
        minute_partition = ", ".join(["window_start", *self._version()])
        clustering = "WITH CLUSTERING ORDER BY (window_start DESC)"
        minute_options = ""
        if self.shape.expires:
            options = (
                f"default_time_to_live = {ttl_s} AND compaction = "
                "{'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'DAYS', "
                "'compaction_window_size': 1}"
            )
            clustering, minute_options = f"{clustering} AND {options}", f" WITH {options}"
        return [
            f"CREATE TABLE IF NOT EXISTS {self.by_key} ({by_key}, "
            f"PRIMARY KEY (({key_partition}), window_start)) {clustering}",
            f"CREATE TABLE IF NOT EXISTS {self.by_minute} ({by_minute}, "
            f"PRIMARY KEY (({minute_partition}), {key_list})){minute_options}",
        ]

    def insert_by_key(self) -> str:
        return _insert(self.by_key, self._key_columns())

    def insert_by_minute(self) -> str:
        return _insert(self.by_minute, self._minute_columns())

    def bind(
        self,
        start: datetime,
        keys: Sequence[Any],
        measures: Sequence[Any],
        *,
        version: int | None = None,
        written_by: Sequence[Any] = (),
    ) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The values of :meth:`insert_by_key` and :meth:`insert_by_minute` for one view row.

        ``start`` is the window start (UTC; its date is the row's ``day``),
        ``written_by`` the values of the layer's :attr:`LayerShape.written_by`.
        """
        if self.versioned == (version is None):
            need = "needs a version" if self.versioned else "has no version"
            raise ValueError(f"A row of {self.by_key} {need}; got version={version!r}.")
        shape = self.shape
        need = len(shape.written_by) - shape.optional_written_by
        if not need <= len(written_by) <= len(shape.written_by):
            names = [name for name, _ in shape.written_by]
            raise ValueError(f"A row of {self.by_key} is written with {names}; got {written_by!r}.")
        written_by = (*written_by, *[None] * (len(shape.written_by) - len(written_by)))
        head = (version,) if self.versioned else ()
        return (
            (*keys, start.date(), *head, start, *measures, *written_by),
            (start, *head, *keys, *measures, *written_by),
        )

    def _known(self, measures: Sequence[str]) -> list[str]:
        names = self._measures()
        unknown = [m for m in measures if m not in names]
        if unknown:
            raise ValueError(
                f"View {self.spec.name!r} has no measures {unknown}; it has: {', '.join(names)}."
            )
        return list(measures)

    def _key_partition(self) -> str:
        return _equal([*self.spec.keys, "day", *self._version()])

    def _minute_partition(self) -> str:
        return _equal(["window_start", *self._version()])

    def select_range(self, measures: Sequence[str]) -> str:
        """Rows ``(window_start epoch ms, *measures)`` of one key and day, windows ``[lo, hi)``.

        Bound values: ``(*keys, day[, version], lo, hi)``.
        """
        if not measures:
            raise ValueError(f"A range read of {self.spec.name!r} needs at least one measure.")
        columns = ", ".join(["toUnixTimestamp(window_start)", *self._known(measures)])
        return (
            f"SELECT {columns} FROM {self.by_key} WHERE {self._key_partition()} "
            "AND window_start >= ? AND window_start < ?"
        )

    def select_minute(self, measures: Sequence[str]) -> str:
        """Rows ``(*keys, *measures)`` of every key of one window (no measures: the keys).

        Bound values: ``(window_start[, version])``.
        """
        columns = ", ".join([*self.spec.keys, *self._known(measures)])
        return f"SELECT {columns} FROM {self.by_minute} WHERE {self._minute_partition()}"

    def select_stored_window(self) -> str:
        """Every row of one window, with its measures and the write that made it, from the
        by-minute table (one partition: a micro-batch's fold reads each window it touches
        once, not each row).

        Bound values: ``(window_start[, version])``; columns: the keys, the measures, then
        the layer's :attr:`LayerShape.written_by`.
        """
        written_by = [name for name, _ in self.shape.written_by]
        columns = ", ".join([*self.spec.keys, *self._measures(), *written_by])
        return f"SELECT {columns} FROM {self.by_minute} WHERE {self._minute_partition()}"

    def added_columns(self) -> dict[str, dict[str, str]]:
        """Per table, the columns a table created by an older release may lack and that can
        be added in place (:func:`layout.ddl.create_tables` adds them): the measures (a view
        that gained one) and :attr:`LayerShape.written_by`."""
        types = self._types()
        columns = {m: types[m] for m in self._measures()} | dict(self.shape.written_by)
        return {table: columns for table in (self.by_key, self.by_minute)}

    def alter_ttl(self, ttl_s: int) -> list[str]:
        """Both ALTER TABLE statements giving rows written from now on ``ttl_s`` (a table
        created with another TTL keeps it: ``CREATE TABLE IF NOT EXISTS`` changes nothing)."""
        if not self.shape.expires:
            raise ValueError(f"The {self.layer} rows of {self.spec.name!r} never expire; no ttl_s.")
        return [
            f"ALTER TABLE {t} WITH default_time_to_live = {int(ttl_s)}"
            for t in (self.by_key, self.by_minute)
        ]

    def drop(self) -> list[str]:
        """Both DROP TABLE statements (a superseded speed version is dropped whole)."""
        return [f"DROP TABLE IF EXISTS {t}" for t in (self.by_key, self.by_minute)]

    def delete_minute(self) -> str:
        """Delete one window's partition. Bound values: ``(window_start[, version])``."""
        return f"DELETE FROM {self.by_minute} WHERE {self._minute_partition()}"

    def delete_day(self) -> str:
        """Delete one key's day partition. Bound values: ``(*keys, day[, version])``."""
        return f"DELETE FROM {self.by_key} WHERE {self._key_partition()}"


def _insert(table: str, columns: list[str]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"


def view_tables(
    keyspace: str,
    layer: Layer,
    views: Sequence[ViewSpec] | None = None,
    table_version: int = 0,
    grains: Sequence[Grain] = ("minute",),
) -> list[ViewTables]:
    """The tables of ``views`` (default: every declared pipeline's) in one layer, at each of
    ``grains``."""
    if views is None:
        from pipelines import declared_views

        views = declared_views()
    return [
        ViewTables(spec, keyspace, layer, table_version=table_version, grain=grain)
        for spec in views
        for grain in grains
    ]
