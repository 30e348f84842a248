"""Staging: what a silver run parsed, kept until the silver gate has checked the run.

One folder per silver run, ``<lake>/_staging/<table>/silver/<entry id>/``,
named by the run's ledger entry id:

- ``records/``: a Delta table, every bronze record the run read, parsed once
  (:func:`views.input.flat_records`: a valid event with its payload, or a
  reject with its raw text and reason) with ``fresh`` when no earlier silver
  run had seen it. It holds personal data, so it keeps no column statistics
  (``delta.dataSkippingNumIndexedCols = 0``: its transaction log names no
  user) and no deletion vectors (a ``DELETE`` rewrites the files);
- ``copies/``: the ``(partition, offset)`` of the records silver dropped as
  copies (:mod:`batch_layer.dedupe`): no personal data.

Its life:

- silver writes it, then records its ledger entry naming it;
- the silver gate counts the run from it (:mod:`batch_layer.quality`) and
  deletes it once a gate passed on the run;
- a run that failed before its ledger entry leaves a folder no entry names,
  and a gate may pass without deleting its folders (a crash): the next silver
  run deletes every folder not awaiting a gate (:func:`sweep`);
- ``forget`` deletes the user's rows from every folder there is, and at once
  the files that held them (:func:`erase`): a folder of a run not yet checked
  still balances, since the gate leaves suppressed users out of both bronze
  and staging.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from typing import TYPE_CHECKING, Any

from batch_layer.ledger import Entry
from core.log import get_logger, log_event
from core.settings import Settings
from pipelines import PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "awaiting_gate",
    "erase",
    "new_reject",
    "on_days",
    "read_records",
    "read_run",
    "run_event",
    "staging_path",
    "staging_root",
    "sweep",
    "write_copies",
    "write_records",
]

_log = get_logger(__name__)

_RECORDS_PROPERTIES = {
    "delta.dataSkippingNumIndexedCols": "0",
    "delta.enableDeletionVectors": "false",
}
"""No column statistics (the log would hold ids as minima and maxima); no deletion vectors,
so that ``forget``'s ``DELETE`` rewrites the files that held the user's rows."""
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


def staging_root(settings: Settings, spec: PipelineSpec) -> str:
    """The folder holding every silver run's staging folder."""
    return f"{settings.lake.root.rstrip('/')}/_staging/{spec.table_name(settings)}/silver"


def staging_path(settings: Settings, spec: PipelineSpec, entry_id: str) -> str:
    """Where the silver run recorded as ledger entry ``entry_id`` keeps what it parsed."""
    return f"{staging_root(settings, spec)}/{entry_id}"


def awaiting_gate(entries: Iterable[Entry]) -> set[str]:
    """Ids of the silver entries with a staging folder that no passed silver gate consumed.

    >>> from datetime import UTC, datetime
    >>> t = datetime(2024, 1, 1, tzinfo=UTC)
    >>> a = Entry("silver", "r", t, detail={"staging": "s/a"}, entry_id="a")
    >>> b = Entry("silver", "r", t, detail={"staging": "s/b"}, entry_id="b")
    >>> gate = Entry("gate", "r", t, detail={"stage": "silver"}, consumed=("a",))
    >>> sorted(awaiting_gate([a, b, gate]))
    ['b']
    """
    entries = list(entries)
    checked = {
        entry_id
        for gate in entries
        if gate.step == "gate" and gate.detail.get("stage") == "silver" and gate.passed
        for entry_id in gate.consumed or ()
    }
    return {
        e.entry_id
        for e in entries
        if e.step == "silver" and "staging" in e.detail and e.entry_id not in checked
    }


def on_days(days: Sequence[date]) -> Column:
    """A staging row whose event falls on one of ``days`` (none: no row)."""
    from pyspark.sql import functions as F

    return F.col("event_date").isin(list(days)) if days else F.lit(False)


def run_event(rebuilt: Sequence[date]) -> Column:
    """A staging row that is one of its run's events: valid, and new or on a day the run
    rebuilt (``rebuilt``)."""
    from pyspark.sql import functions as F

    return F.col("reason").isNull() & (F.col("fresh") | on_days(rebuilt))


def new_reject() -> Column:
    """A staging row that is one of its run's rejects: new, and not the contract's event."""
    from pyspark.sql import functions as F

    return F.col("fresh") & F.col("reason").isNotNull()


def write_records(records: DataFrame, folder: str) -> None:
    """Write a run's parsed records (the ``records`` table of ``folder``)."""
    writer = records.write.format("delta").mode("overwrite")
    writer.options(**_RECORDS_PROPERTIES).save(f"{folder}/records")


def write_copies(copies: DataFrame, folder: str) -> None:
    """Write the ``(partition, offset)`` of the records the run dropped as copies."""
    copies.select("partition", "offset").coalesce(1).write.format("delta").mode("overwrite").save(
        f"{folder}/copies"
    )


def read_records(spark: SparkSession, folder: str) -> DataFrame:
    """A run's parsed records, as :func:`write_records` wrote them."""
    return spark.read.format("delta").load(f"{folder}/records")


def read_run(spark: SparkSession, folder: str) -> tuple[DataFrame, DataFrame | None] | None:
    """(a run's parsed records, the coordinates of its copies) from its folder.

    A folder written before staging was a Delta table holds the records as
    plain Parquet and no copies (None: the gate uses the count the run
    recorded); a folder that is gone gives None (``forget`` deletes such an
    old folder whole, as it cannot delete rows from it).
    """
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, f"{folder}/records"):
        records = spark.read.format("delta").load(f"{folder}/records")
        return records, spark.read.format("delta").load(f"{folder}/copies")
    if _exists(spark, folder):
        return spark.read.parquet(folder), None
    return None


def _fs(spark: SparkSession, path: str) -> tuple[Any, Any]:
    """(the Hadoop file system holding ``path``, its Hadoop ``Path``)."""
    jvm = spark.sparkContext._jvm
    target = jvm.org.apache.hadoop.fs.Path(path)
    return target.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), target


def _exists(spark: SparkSession, path: str) -> bool:
    fs, target = _fs(spark, path)
    return bool(fs.exists(target))


def _folders(spark: SparkSession, root: str) -> list[str]:
    """The run folders under ``root`` (none when it does not exist), on any file system."""
    fs, target = _fs(spark, root)
    if not fs.exists(target):
        return []
    return sorted(s.getPath().getName() for s in fs.listStatus(target) if s.isDirectory())


def sweep(
    spark: SparkSession, settings: Settings, spec: PipelineSpec, keep: Collection[str]
) -> list[str]:
    """Delete every run folder but those of ``keep`` (entry ids); return the ids deleted.

    Silver calls it before it stages, with :func:`awaiting_gate`: what is left
    is a failed attempt's folder or one a passed gate did not get to delete.
    Steps of a pipeline run one at a time, so no run is writing a folder then.
    """
    from batch_layer.tables import delete_path

    root = staging_root(settings, spec)
    gone = [name for name in _folders(spark, root) if name not in keep]
    for name in gone:
        delete_path(spark, f"{root}/{name}")
    if gone:
        log_event(_log, "staging.swept", pipeline=spec.name, folders=gone)
    return gone


def erase(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    user_id: str,
    rows: Callable[[Sequence[str]], Column],
) -> list[tuple[str, Mapping[str, str] | None]]:
    """Delete ``user_id``'s ``rows(columns)`` (a predicate on
    :data:`batch_layer.suppressed.FORGOTTEN`) from every run folder's records (``columns``:
    theirs); return the (operation, metrics) of each commit.

    The files that held them are deleted at once (``VACUUM`` with no
    retention): a staging table is read by the gate alone, never by time
    travel, and a pipeline's steps run one at a time. A folder whose records
    are not a Delta table (written before this layout, or by a run that died
    while staging) cannot lose single rows: it is deleted whole
    (``DROP FOLDER``); the gate then reports its run as not reconciled.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from batch_layer.suppressed import delete_rows
    from batch_layer.tables import delete_path

    root = staging_root(settings, spec)
    commits: list[tuple[str, Mapping[str, str] | None]] = []
    for name in _folders(spark, root):
        folder = f"{root}/{name}"
        if not DeltaTable.isDeltaTable(spark, f"{folder}/records"):
            delete_path(spark, folder)
            commits.append(("DROP FOLDER", None))
            continue
        table = DeltaTable.forPath(spark, f"{folder}/records")
        before = table.history(1).collect()[0].version
        delete_rows(table, user_id, rows(table.toDF().columns))
        done = table.history().where(F.col("version") > before).orderBy("version")
        found = [(c.operation, c.operationMetrics) for c in done.collect()]
        deleted = ("numDeletedRows", "numTargetRowsDeleted")
        if any(int((m or {}).get(k, 0)) for _, m in found for k in deleted):
            with _retention_check_off(spark):
                table.vacuum(0.0)
        commits += found
    return commits


@contextmanager
def _retention_check_off(spark: SparkSession) -> Iterator[None]:
    """Delta lets the block vacuum with a retention under its 7-day safety check."""
    previous = spark.conf.get(_RETENTION_CHECK, None)
    spark.conf.set(_RETENTION_CHECK, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(_RETENTION_CHECK)
        else:
            spark.conf.set(_RETENTION_CHECK, previous)
