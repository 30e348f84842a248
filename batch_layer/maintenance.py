"""Maintenance: compact and vacuum the lake, delete superseded batch versions.

- :func:`optimize` bin-packs small files (``OPTIMIZE``) in every table of a
  pipeline, its ledger included: hourly runs append and rewrite small
  partitions, and every step run appends one small file to the ledger.
- :func:`vacuum` removes files no table version within
  ``settings.batch.vacuum_retention_hours`` needs, or within
  ``erasure_retention_hours`` when that is shorter: the files a ``forget``
  rewrote (still holding the erased rows, for time travel) are physically
  deleted here (Delta's default safety check stays on unless the retention
  is set below 7 days).
- :func:`drop_superseded` deletes the Cassandra rows of batch versions a
  newer publish replaced more than ``superseded_version_grace_s`` ago (no
  reader can still hold their pointer). A version its day's pointer
  (``batch_days``) still names is never deleted, whatever ``batch_superseded``
  says: publish records the old version before it moves the pointer, so a
  publish that died between the two writes leaves the served version listed.
  Speed rows need no cleanup: they carry a TTL (``settings.speed.ttl_s``).
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from batch_layer.bronze import bronze_path
from batch_layer.gold import gold_path
from batch_layer.ledger import ledger_path
from batch_layer.silver import rejects_path, silver_path
from core.log import get_logger, log_event
from core.settings import Settings
from layout import GRAINS, PointerTables, ViewTables
from layout.lake import derived_path
from pipelines import DerivedSpec, PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["drop_superseded", "lake_tables", "optimize", "vacuum", "vacuum_hours"]

_log = get_logger(__name__)


def lake_tables(settings: Settings, spec: PipelineSpec | DerivedSpec) -> list[str]:
    """Paths of every Delta table of the pipeline, its ledger last (a derived pipeline's:
    its table and its ledger)."""
    if isinstance(spec, DerivedSpec):
        return [derived_path(settings, spec.name), ledger_path(settings, spec)]
    return [
        bronze_path(settings, spec),
        silver_path(settings, spec),
        rejects_path(settings, spec),
        *(gold_path(settings, view) for view in spec.view_specs),
        ledger_path(settings, spec),
    ]


def optimize(spark: SparkSession, settings: Settings, spec: PipelineSpec | DerivedSpec) -> dict:
    """``OPTIMIZE`` every table (bronze Z-ordered by Kafka partition and offset, so that its
    files stay narrow in the offsets a backfill reads); return files removed and added per
    table."""
    from delta.tables import DeltaTable

    out = {}
    bronze = bronze_path(settings, spec)
    for path in lake_tables(settings, spec):
        if not DeltaTable.isDeltaTable(spark, path):
            continue
        builder = DeltaTable.forPath(spark, path).optimize()
        # Bronze's files stay narrow in (partition, offset), which backfills prune by.
        done = builder.executeZOrderBy("partition", "offset") if path == bronze else None
        metrics = (done or builder.executeCompaction()).collect()[0]
        stats = metrics.metrics
        out[path] = {"removed": stats.numFilesRemoved, "added": stats.numFilesAdded}
    log_event(_log, "maintenance.optimized", pipeline=spec.name, tables=out)
    return out


def vacuum_hours(settings: Settings) -> int:
    """VACUUM's retention: the shorter of the vacuum and the erasure retentions.

    >>> from core.settings import BatchSettings
    >>> vacuum_hours(Settings(batch=BatchSettings(erasure_retention_hours=24)))
    24
    """
    return min(settings.batch.vacuum_retention_hours, settings.batch.erasure_retention_hours)


def vacuum(spark: SparkSession, settings: Settings, spec: PipelineSpec | DerivedSpec) -> list[str]:
    """``VACUUM`` every table with the configured retention; return the paths vacuumed."""
    from delta.tables import DeltaTable

    hours = vacuum_hours(settings)
    check = "spark.databricks.delta.retentionDurationCheck.enabled"
    if hours < 168:
        spark.conf.set(check, "false")
    done = []
    try:
        for path in lake_tables(settings, spec):
            if DeltaTable.isDeltaTable(spark, path):
                DeltaTable.forPath(spark, path).vacuum(float(hours))
                done.append(path)
    finally:
        spark.conf.unset(check)
    log_event(_log, "maintenance.vacuumed", pipeline=spec.name, retention_hours=hours, tables=done)
    return done


_WINDOWS_PER_DAY = {"minute": 1440, "hour": 24, "day": 1}


def _drop_version(session: Any, tables: ViewTables, day: date, version: int) -> None:
    """Delete one version of one day from a view's two batch tables of one grain."""
    from cassandra.concurrent import execute_concurrent_with_args

    midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
    step = timedelta(days=1) / _WINDOWS_PER_DAY[tables.grain]
    windows = [(midnight + i * step, version) for i in range(_WINDOWS_PER_DAY[tables.grain])]
    keys = session.prepare(tables.select_minute(()))
    found: set[tuple] = set()
    for _ok, result in execute_concurrent_with_args(
        session, keys, windows, concurrency=64, raise_on_first_error=True
    ):
        found.update(tuple(r) for r in result)
    drop_key = session.prepare(tables.delete_day())
    execute_concurrent_with_args(
        session, drop_key, [(*k, day, version) for k in found], concurrency=64
    )
    execute_concurrent_with_args(
        session, session.prepare(tables.delete_minute()), windows, concurrency=64
    )


def drop_superseded(settings: Settings, spec: PipelineSpec) -> int:
    """Delete batch versions replaced longer ago than the grace period; return how many.

    A listed version that its day's pointer still names is kept (and logged as
    ``maintenance.superseded_still_served``): it is what serving reads.
    """
    from core.cassandra import connect

    keyspace = settings.cassandra.keyspace
    cutoff = datetime.now(UTC) - timedelta(seconds=settings.batch.superseded_version_grace_s)
    cluster, session = connect(settings.cassandra)
    dropped = 0
    try:
        pointers = PointerTables(keyspace)
        listed = session.prepare(pointers.select_superseded)
        pointer = session.prepare(pointers.select_day)
        forget = session.prepare(pointers.delete_superseded)
        for view in spec.view_specs:
            grains = [ViewTables(view, keyspace, "batch", grain=grain) for grain in GRAINS]
            for row in session.execute(listed, (view.name,)):
                if row.superseded_at.replace(tzinfo=UTC) > cutoff:
                    continue
                day = row.day.date()
                served = session.execute(pointer, (view.name, day)).one()
                if served is not None and served.version == row.version:
                    log_event(
                        _log,
                        "maintenance.superseded_still_served",
                        level=logging.WARNING,
                        view=view.name,
                        day=day.isoformat(),
                        version=row.version,
                        why="batch_days still points at this version (a publish stopped "
                        "before moving the pointer); kept until a publish replaces it",
                    )
                    continue
                for tables in grains:
                    _drop_version(session, tables, day, row.version)
                session.execute(forget, (view.name, day, row.version))
                dropped += 1
    finally:
        cluster.shutdown()
    log_event(_log, "maintenance.superseded_dropped", pipeline=spec.name, versions=dropped)
    return dropped
