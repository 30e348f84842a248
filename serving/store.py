"""Reading the speed and batch views from Cassandra, asynchronously, with prepared statements.

Every read is a prepared statement bound with the caller's values (keys are
never part of CQL text) and one partition slice, as the tables are designed:
a key's windows of one day, or every key of one window. Reads run on the
driver's I/O thread; :func:`_await` hands each result to the asyncio loop
that asked, so a request costs no thread of its own.

Two small caches keep the hot path to the rows it must read:

- the *pointers* (per view: the batch boundary, the version of each day,
  the speed tables' version, the speed layer's progress, the last
  reconciliation of the two layers) are re-read at most every
  ``pointer_cache_s`` seconds, boundary first, then days, so a cached
  boundary never runs ahead of the day versions the batch layer wrote
  before it; a new speed version's statements are prepared when its
  pointer is first read, before any request uses it;
- batch partitions are immutable once their version is published, so their
  rows are kept in a bounded LRU keyed by version and grain (the merges of
  closed speed windows are kept by :mod:`serving.ranking`).

Batch tables are read at every grain (:data:`layout.GRAINS`): the minutes
and the hour and day rollups the batch layer publishes with them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from layout import GRAINS, RECONCILE_COLUMNS, PointerTables, ViewTables, read_speed_versions
from pipelines import declared_views
from serving.lru import Lru
from views import ViewSpec

__all__ = ["Pointers", "ServingStore", "ViewPointers"]

_PAGE = 5000


@dataclass(frozen=True)
class ViewPointers:
    """What serving needs to know about one view before reading it."""

    boundary: int | None
    """Epoch ms of the batch boundary; None when the batch layer never published the view."""
    versions: Mapping[date, int] = field(default_factory=dict)
    """UTC day -> the published batch version to read."""
    newest_event: int | None = None
    """Newest event time the speed layer has reflected (epoch ms)."""
    watermark: int | None = None
    """The speed query's watermark (epoch ms)."""
    heartbeat: int | None = None
    """When the speed query last reported progress (epoch ms)."""
    kafka_lag: int | None = None
    """Records in Kafka the speed query has not read yet."""
    speed_run: int | None = None
    """The speed run (``speed_runs`` generation) that reported the progress: a reset starts
    a new one, which may rewrite windows the old one had closed."""
    speed_version: int = 0
    """The version of the speed tables to read (``speed_versions``; a Kappa replay switches it)."""
    reconciled: Mapping[str, Any] | None = None
    """The view's last reconciliation of the two layers (``reconcile_results``: its
    :data:`layout.RECONCILE_COLUMNS`, times in epoch ms); None: never reconciled."""
    rolled_up: frozenset[date] = frozenset()
    """The days whose published version has its hour and day rollups."""
    batch_generation: int = 0
    """Changes whenever the boundary, a day's version or its rollups change (per worker):
    what a cached answer over batch windows depends on."""
    speed_generation: int = 0
    """Changes whenever the speed version or the speed layer's progress (a micro-batch)
    changes: what a cached answer over speed windows depends on."""


@dataclass(frozen=True)
class Pointers:
    """Every view's pointers, as read at ``read_at`` (epoch ms)."""

    views: Mapping[str, ViewPointers]
    read_at: int
    loaded: float
    """``time.monotonic()`` when read."""


def _await(session: Any, statement: Any, params: Sequence[Any], profile: Any) -> asyncio.Future:
    """Run a statement on the driver and resolve an asyncio future with all its rows."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    response = session.execute_async(statement, params, execution_profile=profile)
    rows: list[Any] = []

    def resolve(result: Any, error: BaseException | None) -> None:
        if done.done():
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)

    def on_page(page: list[Any]) -> None:
        rows.extend(page)
        if response.has_more_pages:
            response.start_fetching_next_page()
        else:
            loop.call_soon_threadsafe(resolve, rows, None)

    def on_error(error: BaseException) -> None:
        loop.call_soon_threadsafe(resolve, None, error)

    response.add_callbacks(on_page, on_error)
    return done


class ServingStore:
    """Prepared reads of every view's speed and batch tables in one keyspace.

    Build it inside the process and event loop that will use it (one per
    worker): it prepares every statement up front, so a missing table fails
    at start-up, not on the first request.
    """

    def __init__(
        self,
        session: Any,
        keyspace: str,
        *,
        views: Sequence[ViewSpec] | None = None,
        pointer_cache_s: float = 1.0,
        batch_cache_entries: int = 4096,
    ) -> None:
        from cassandra.cluster import EXEC_PROFILE_DEFAULT
        from cassandra.query import tuple_factory

        self.session = session
        self.keyspace = keyspace
        self.views = {spec.name: spec for spec in views or declared_views()}
        self.pointer_cache_s = pointer_cache_s
        self._profile = session.execution_profile_clone_update(
            EXEC_PROFILE_DEFAULT, row_factory=tuple_factory
        )
        self._batch_cache = Lru(batch_cache_entries)
        self._pointers: Pointers | None = None
        self._refresh: asyncio.Future | None = None
        self._by_key: dict[tuple[str, str, int, str, tuple[str, ...]], Any] = {}
        self._by_window: dict[tuple[str, str, int, str, str], Any] = {}
        self._generations: dict[str, tuple[tuple, int, tuple, int]] = {}
        pointers = PointerTables(keyspace)
        self._boundary = self._prepare(pointers.select_boundary_ms)
        self._days = self._prepare(pointers.select_days)
        self._progress = self._prepare(pointers.select_freshness_ms)
        self._speed_version = self._prepare(pointers.select_speed_version)
        self._reconciled = self._prepare(pointers.select_reconcile)
        self._speed_prepared: set[tuple[str, int]] = set()
        versions = read_speed_versions(session, keyspace, list(self.views))
        for spec in self.views.values():
            for grain in GRAINS:
                self._prepare_view(spec, "batch", 0, grain)
            self._prepare_view(spec, "speed", versions[spec.name])

    def _prepare(self, cql: str) -> Any:
        statement = self.session.prepare(cql)
        statement.fetch_size = _PAGE
        return statement

    def _prepare_view(self, spec: ViewSpec, layer: str, version: int, grain: str = "minute"):
        """Prepare every read of one view's tables in one layer, speed version and grain."""
        measures = tuple(m.name for m in spec.measures)
        self._key_statement(spec.name, layer, version, grain, measures)
        tables = self._tables(spec.name, layer, version, grain)
        for m in spec.measures:
            statement = self._prepare(tables.select_minute([m.name]))
            self._by_window[(spec.name, layer, version, grain, m.name)] = statement
        if layer == "speed":
            self._speed_prepared.add((spec.name, version))

    def _tables(self, view: str, layer: str, version: int, grain: str) -> ViewTables:
        spec = self.views[view]
        if layer == "speed":
            return ViewTables(spec, self.keyspace, "speed", table_version=version)
        return ViewTables(spec, self.keyspace, "batch", grain=grain)  # type: ignore[arg-type]

    def _key_statement(
        self, view: str, layer: str, version: int, grain: str, measures: tuple[str, ...]
    ) -> Any:
        """The by-key range read of ``measures`` (prepared once per worker and measure set).

        ``version``: the speed tables' version (0 for batch, whose version is a key column).
        """
        cache_key = (view, layer, version, grain, measures)
        found = self._by_key.get(cache_key)
        if found is not None:
            return found
        # Names are checked by the query core; select_range refuses unknown ones.
        tables = self._tables(view, layer, version, grain)
        statement = self._by_key[cache_key] = self._prepare(tables.select_range(measures))
        return statement

    def spec(self, view: str) -> ViewSpec:
        return self.views[view]

    async def key_rows(
        self,
        view: str,
        layer: str,
        keys: tuple[str, ...],
        day: date,
        version: int | None,
        lo: int,
        hi: int,
        measures: tuple[str, ...],
        grain: str = "minute",
    ) -> list[tuple]:
        """Rows ``(window_start_ms, *measures)`` of one key and day, windows ``[lo, hi)``.

        ``version``: the batch version of the day, or the speed tables' version."""
        if layer == "speed":
            statement = self._key_statement(view, layer, version or 0, "minute", measures)
            return await _await(self.session, statement, (*keys, day, lo, hi), self._profile)
        statement = self._key_statement(view, layer, 0, grain, measures)
        cache_key = (view, keys, day, version, grain, lo, hi, measures)
        rows = self._batch_cache.get(cache_key)
        if rows is None:
            params = (*keys, day, version, lo, hi)
            rows = await _await(self.session, statement, params, self._profile)
            self._batch_cache.put(cache_key, rows)
        return rows

    async def window_rows(
        self,
        view: str,
        layer: str,
        measure: str,
        start: int,
        version: int | None,
        grain: str = "minute",
    ) -> list[tuple]:
        """Rows ``(*keys, value)`` of ``measure`` for every key of one window of ``grain``
        (speed windows are minutes)."""
        if layer == "speed":
            statement = self._by_window[(view, layer, version or 0, "minute", measure)]
            return await _await(self.session, statement, (start,), self._profile)
        statement = self._by_window[(view, layer, 0, grain, measure)]
        cache_key = (view, measure, grain, start, version)
        rows = self._batch_cache.get(cache_key)
        if rows is None:
            rows = await _await(self.session, statement, (start, version), self._profile)
            self._batch_cache.put(cache_key, rows)
        return rows

    async def pointers(self) -> Pointers:
        """Every view's pointers, re-read when older than ``pointer_cache_s``.

        One read is in flight per process; while it runs, callers get the
        previous pointers unless those are older than five cache periods.
        """
        current = self._pointers
        age = None if current is None else time.monotonic() - current.loaded
        if age is not None and age < self.pointer_cache_s:
            return current
        if self._refresh is None:
            self._refresh = asyncio.ensure_future(self._read_pointers())
            self._refresh.add_done_callback(self._refreshed)
        if current is not None and age < 5 * self.pointer_cache_s:
            return current
        return await asyncio.shield(self._refresh)

    def _refreshed(self, future: asyncio.Future) -> None:
        self._refresh = None
        if not future.cancelled() and future.exception() is None:
            self._pointers = future.result()

    async def _read_pointers(self) -> Pointers:
        names = list(self.views)
        run = self._run
        # Boundary strictly before days: publish writes days first, then the boundary.
        boundaries, progress, speed, reconciled = await asyncio.gather(
            asyncio.gather(*(run(self._boundary, (n,)) for n in names)),
            asyncio.gather(*(run(self._progress, (n,)) for n in names)),
            asyncio.gather(*(run(self._speed_version, (n,)) for n in names)),
            asyncio.gather(*(run(self._reconciled, (n,)) for n in names)),
        )
        days = await asyncio.gather(*(run(self._days, (n,)) for n in names))
        versions = {
            n: (rows[0][0] or 0) if rows else 0 for n, rows in zip(names, speed, strict=True)
        }
        await self._prepare_speed(versions)
        views = {}
        checks = dict(zip(names, reconciled, strict=True))
        for name, b_rows, d_rows, p_rows in zip(names, boundaries, days, progress, strict=True):
            newest = watermark = heartbeat = lag = run = None
            if p_rows:
                newest, watermark, heartbeat, lag, run = p_rows[0]
            boundary = b_rows[0][0] if b_rows else None
            day_versions = {_as_date(day): version for day, version, _ in d_rows}
            rolled_up = frozenset(_as_date(day) for day, _, rollups in d_rows if rollups)
            batch, speed = self._generation(
                name,
                (boundary, tuple(sorted(day_versions.items())), tuple(sorted(rolled_up))),
                (versions[name], run, newest, watermark, heartbeat),
            )
            views[name] = ViewPointers(
                boundary=boundary,
                versions=day_versions,
                newest_event=newest,
                watermark=watermark,
                heartbeat=heartbeat,
                kafka_lag=lag,
                speed_run=run,
                speed_version=versions[name],
                reconciled=dict(zip(RECONCILE_COLUMNS, checks[name][0], strict=True))
                if checks[name]
                else None,
                rolled_up=rolled_up,
                batch_generation=batch,
                speed_generation=speed,
            )
        return Pointers(views, int(time.time() * 1000), time.monotonic())

    async def _prepare_speed(self, versions: Mapping[str, int]) -> None:
        """Prepare the reads of speed versions a switch just pointed at (off the event loop)."""
        loop = asyncio.get_running_loop()
        for name, version in versions.items():
            if (name, version) not in self._speed_prepared:
                spec = self.views[name]
                await loop.run_in_executor(None, self._prepare_view, spec, "speed", version)

    def _generation(self, view: str, batch: tuple, speed: tuple) -> tuple[int, int]:
        """The view's batch and speed generations: each moves on when its pointers changed."""
        before = self._generations.get(view)
        if before is None:
            generations = (batch, 1, speed, 1)
        else:
            generations = (
                batch,
                before[1] + (batch != before[0]),
                speed,
                before[3] + (speed != before[2]),
            )
        self._generations[view] = generations
        return generations[1], generations[3]

    def _run(self, statement: Any, params: Sequence[Any]) -> asyncio.Future:
        return _await(self.session, statement, params, self._profile)


def _as_date(value: Any) -> date:
    # The driver returns cassandra.util.Date for CQL ``date``.
    return value if isinstance(value, date) else value.date()
