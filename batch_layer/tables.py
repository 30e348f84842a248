"""Delta table properties every lake table carries, set from settings.

- ``delta.logRetentionDuration``: how far back time travel and the history go;
- ``delta.deletedFileRetentionDuration``: what VACUUM keeps for running readers;
- ``delta.checkpointInterval``: commits between log checkpoints (fast snapshot loads);
- ``delta.autoOptimize.optimizeWrite``/``autoCompact``: fewer small files per run.

A new table gets them in the commit that creates it (:func:`creation_options`);
:func:`ensure_table_properties` sets them on older tables, once per table and
only where a value differs, so a run does not add a property commit every time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

BRONZE_PROPERTIES = {
    "delta.autoOptimize.optimizeWrite": "false",
    "delta.autoOptimize.autoCompact": "false",
}
"""Bronze keeps each run's files as written: one per Kafka partition (the source's tasks),
whose ``partition``/``offset`` statistics let a backfill's offset ranges skip every other
file (:mod:`batch_layer.bronze_index`). Optimized writes and auto-compaction would mix
partitions and runs into files whose statistics span days; the maintenance ``OPTIMIZE``
Z-orders bronze by ``(partition, offset)`` instead."""


def silver_properties(key: Sequence[str]) -> dict[str, str]:
    """Silver's own properties, for a contract whose key is ``key``.

    Silver's rows are written as the run's staging holds them, one file per staging file
    and day, with no shuffle first: an optimized write shuffled every row, payload
    included, to make the same few files (a third of a 1M-event run's write). No
    auto-compaction either: it rewrote a run's files right after writing them; the
    maintenance DAG's ``OPTIMIZE`` compacts silver's small files once a day
    (:mod:`batch_layer.maintenance`). File statistics only on the columns reads skip by:
    Kafka coordinates (a run's own rows), event and arrival times (late rows) and the
    key; not the user's ids, which no read skips by and which the log would otherwise keep
    as minima and maxima.

    >>> silver_properties(("source_id", "event_id"))["delta.dataSkippingStatsColumns"]
    'partition,offset,event_time,receivedAt,source_id,event_id'
    """
    columns = dict.fromkeys(("partition", "offset", "event_time", "receivedAt", *key))
    return {
        "delta.autoOptimize.optimizeWrite": "false",
        "delta.autoOptimize.autoCompact": "false",
        "delta.dataSkippingStatsColumns": ",".join(columns),
    }


REJECTS_PROPERTIES = {"delta.dataSkippingStatsColumns": "partition,offset,reason"}
"""Statistics on the rejects' coordinates and reasons, not on their raw text (which may hold
a user's id)."""

__all__ = [
    "BRONZE_PROPERTIES",
    "REJECTS_PROPERTIES",
    "creation_options",
    "current_properties",
    "delete_path",
    "ensure_properties",
    "ensure_table_properties",
    "silver_properties",
    "table_properties",
]


def table_properties(settings: Settings) -> dict[str, str]:
    """The properties of every lake table.

    >>> table_properties(Settings())["delta.checkpointInterval"]
    '10'
    """
    return {
        "delta.logRetentionDuration": settings.batch.log_retention,
        "delta.deletedFileRetentionDuration": settings.batch.deleted_file_retention,
        "delta.checkpointInterval": str(settings.batch.checkpoint_interval),
        "delta.autoOptimize.optimizeWrite": "true",
        "delta.autoOptimize.autoCompact": "true",
    }


def creation_options(settings: Settings, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Writer options that give a table its properties in the commit that creates it (Delta
    ignores them on later writes), so a new table needs no ``ALTER TABLE`` commit after it.

    >>> creation_options(Settings(), {"delta.autoOptimize.autoCompact": "false"})[
    ...     "delta.autoOptimize.autoCompact"
    ... ]
    'false'
    """
    return table_properties(settings) | (extra or {})


def ensure_table_properties(
    spark: SparkSession, settings: Settings, *paths: str, extra: dict[str, str] | None = None
) -> None:
    """Set the properties (and ``extra``) on each Delta table at ``paths`` where they differ."""
    ensure_properties(spark, table_properties(settings) | (extra or {}), *paths)


def ensure_properties(spark: SparkSession, wanted: dict[str, str], *paths: str) -> None:
    """Set ``wanted`` (and only those) on each Delta table at ``paths`` where they differ;
    the tables' other properties stay as they are."""
    from delta.tables import DeltaTable

    for path in paths:
        done = (path, tuple(sorted(wanted.items())))
        if done in _ENSURED or not DeltaTable.isDeltaTable(spark, path):
            continue
        current = current_properties(spark, path)
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            assignments = ", ".join(f"'{k}' = '{v}'" for k, v in sorted(changed.items()))
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")
        _ENSURED.add(done)


def current_properties(spark: SparkSession, path: str) -> dict[str, str]:
    """The properties of the Delta table at ``path``, from its snapshot's metadata.

    ``SHOW TBLPROPERTIES`` reads the metadata Delta already holds for the snapshot; ``DESCRIBE
    DETAIL`` would also size the table's files, three Spark jobs per table (a pipeline run
    checks seven tables). Besides the table's own properties it lists its protocol's
    (``delta.minReaderVersion``, ``delta.feature.*``), which no caller sets.
    """
    rows = spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()
    return {row.key: row.value for row in rows}


_ENSURED: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
"""Tables whose properties this process has set: a long-lived process (the step server)
checks each table once, not at every step."""


def delete_path(spark: SparkSession, path: str) -> None:
    """Delete a folder of the lake (a run's scratch files), on any file system Spark reaches."""
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)
    target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()).delete(target, True)
