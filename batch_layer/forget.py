"""Forget a user: erase their rows from the lake; the gated path republishes their days.

``python -m batch_layer forget --pipeline P --user ID [--run-id R]`` is the
first task of the ``P_forget`` DAG (then ``check_silver`` -> ``gold`` ->
``check_gold`` -> ``publish``). It:

1. records the suppression (:func:`core.suppressions.record_suppression`,
   request id = the run id): the collector drops the user's new events, and
   bronze, silver and the silver gate leave out any record of theirs still
   in Kafka;
2. finds the event days of the user's silver rows (``userId`` or
   ``anonymousId`` = ID, :mod:`batch_layer.suppressed`);
3. deletes the user's records from bronze (the raw value parsed), silver's
   rejects (raw values) and silver with a Delta ``MERGE`` of a one-row source
   holding the id (matched rows deleted, deletion vectors on: the commit's
   predicate names columns, never the id or a digest of it), then
   ``REORG TABLE ... APPLY (PURGE)`` rewrites the files that held them;
4. deletes them from the staging folders of silver runs (a run's gate not
   passed yet, or a failed attempt's), and at once the files that held them
   (:func:`batch_layer.staging.erase`). A forget between ``silver`` and
   ``check_silver`` thus leaves that gate balanced: it counts bronze and
   staging without the suppressed users, and its run moves on to gold;
5. appends a silver entry for those days to the ledger, so the silver gate,
   gold, the gold gate and publish recompute and republish exactly those
   days, as after any silver run.

A rerun is safe and still finds the days: the silver ``DELETE`` commit
records them in its ``userMetadata`` (with the user's keyed digest,
:func:`core.suppressions.subject_of`, never the id),
so a run that failed after it recomputes them all the same. The files the
rewrite replaced stay on storage for time travel until the maintenance
VACUUM removes them (``settings.batch.erasure_retention_hours``): only then
are the rows physically gone (docs/operations.md, "Forgetting a user").
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from batch_layer.bronze import bronze_path
from batch_layer.ledger import Entry, Ledger
from batch_layer.silver import days_predicate, rejects_path, silver_path
from batch_layer.staging import erase as erase_staging
from batch_layer.suppressed import (
    FORGOTTEN,
    delete_rows,
    event_rows,
    parsed_rows,
    record_rows,
)
from batch_layer.tables import ensure_properties
from core.log import get_logger, log_event
from core.settings import BatchSettings, Settings
from core.suppressions import SuppressionRequest, record_suppression, subject_of
from pipelines import PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

__all__ = ["ForgetRun", "TableErasure", "erasure_of", "forget"]

_log = get_logger(__name__)

_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
_DEV_SUBJECT_KEY = BatchSettings().subject_key


@dataclass(frozen=True)
class TableErasure:
    """What forgetting did to one Delta table, from the ``operationMetrics`` of its commits."""

    rows_deleted: int = 0
    files_removed: int = 0
    files_added: int = 0
    operations: tuple[str, ...] = ()
    """The commits, in order: ``DELETE``, ``REORG`` (and any auto-compaction they set off)."""


def erasure_of(commits: Iterable[tuple[str, Mapping[str, str] | None]]) -> TableErasure:
    """The sum of the (operation, operationMetrics) of the commits one erasure made.

    >>> erasure_of([
    ...     ("DELETE", {"numDeletedRows": "40", "numRemovedFiles": "0", "numAddedFiles": "0"}),
    ...     ("REORG", {"numRemovedFiles": "8", "numAddedFiles": "2"}),
    ... ])
    TableErasure(rows_deleted=40, files_removed=8, files_added=2, operations=('DELETE', 'REORG'))
    """
    rows = removed = added = 0
    operations = []
    for operation, metrics in commits:
        metrics = metrics or {}
        operations.append(operation)
        if operation == "DELETE":
            rows += int(metrics.get("numDeletedRows", 0))
        rows += int(metrics.get("numTargetRowsDeleted", 0))  # a MERGE's
        removed += int(metrics.get("numRemovedFiles", metrics.get("numTargetFilesRemoved", 0)))
        added += int(metrics.get("numAddedFiles", metrics.get("numTargetFilesAdded", 0)))
    return TableErasure(rows, removed, added, tuple(operations))


@dataclass(frozen=True)
class ForgetRun:
    """One user forgotten: where rows were deleted, the days to recompute, the wall time."""

    subject: str
    """The user's digest (:func:`core.suppressions.subject_of`); reports never hold the id."""
    request_id: str
    days: tuple[date, ...]
    tables: dict[str, TableErasure]
    seconds: float

    def report(self) -> dict[str, Any]:
        """The run as plain JSON data (stdout and the structured log).

        >>> run = ForgetRun("sha256:ab", "r-1", (date(2024, 3, 1),),
        ...                 {"silver": TableErasure(3, 1, 1, ("DELETE", "REORG"))}, 12.345)
        >>> report = run.report()
        >>> report["days"], report["rows_deleted"], report["seconds"]
        (['2024-03-01'], 3, 12.35)
        >>> report["tables"]["silver"]["operations"]
        ['DELETE', 'REORG']
        """
        tables = {
            name: asdict(t) | {"operations": list(t.operations)} for name, t in self.tables.items()
        }
        return {
            "subject": self.subject,
            "request_id": self.request_id,
            "days": [d.isoformat() for d in self.days],
            "rows_deleted": sum(t.rows_deleted for t in self.tables.values()),
            "tables": tables,
            "seconds": round(self.seconds, 2),
        }


@contextmanager
def _commit_metadata(spark: SparkSession, metadata: dict[str, Any] | None) -> Iterator[None]:
    """Delta commits of the block carry ``metadata`` as their ``userMetadata``."""
    if metadata is None:
        yield
        return
    spark.conf.set(_USER_METADATA, json.dumps(metadata, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(_USER_METADATA)


def _erase(
    spark: SparkSession,
    path: str,
    user_id: str,
    rows: Column,
    *,
    purge_where: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> TableErasure:
    """Delete the user's ``rows`` (a predicate on :data:`FORGOTTEN`) from the table at
    ``path``, then purge them from its files. Deletion vectors are turned on first, and
    only they: the table's other properties are its step's."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    if not DeltaTable.isDeltaTable(spark, path):
        return TableErasure()
    ensure_properties(spark, _DELETION_VECTORS, path)
    table = DeltaTable.forPath(spark, path)
    before = table.history(1).collect()[0].version
    with _commit_metadata(spark, metadata):
        delete_rows(table, user_id, rows)
    where = f" WHERE {purge_where}" if purge_where else ""
    spark.sql(f"REORG TABLE delta.`{path}`{where} APPLY (PURGE)")
    commits = (
        table.history()
        .where(F.col("version") > before)
        .orderBy("version")
        .select("operation", "operationMetrics")
        .collect()
    )
    return erasure_of((c.operation, c.operationMetrics) for c in commits)


def _days(
    spark: SparkSession, path: str, user_id: str, subject: str, fields: tuple[str, ...]
) -> tuple[date, ...]:
    """Event days of the user's silver rows, and those earlier forgets recorded."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return ()
    silver = spark.read.format("delta").load(path)
    found = {
        r.event_date
        for r in silver.where(event_rows(user_id, fields)).select("event_date").distinct().collect()
    }
    history = DeltaTable.forPath(spark, path).history().where("userMetadata IS NOT NULL")
    for row in history.select("userMetadata").collect():
        try:
            meta = json.loads(row.userMetadata)
        except ValueError:
            continue
        if isinstance(meta, dict) and meta.get("forget") == subject:
            found |= {date.fromisoformat(d) for d in meta.get("days", [])}
    return tuple(sorted(found))


def forget(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    user_id: str,
    run_id: str = "manual",
    *,
    everywhere: bool = True,
) -> ForgetRun:
    """Suppress ``user_id`` (in every pipeline, present and future, or with ``everywhere``
    False in ``spec``'s only), delete their rows from ``spec``'s lake, queue their days for
    gold."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    scope = None if everywhere else spec.name
    request = SuppressionRequest(user_id, datetime.now(UTC), run_id, scope)
    if settings.environment != "local" and settings.batch.subject_key == _DEV_SUBJECT_KEY:
        raise ValueError(
            f"environment={settings.environment} still uses the local development subject key: "
            "set WAP_BATCH__SUBJECT_KEY (a secret of 32 characters or more, kept stable)."
        )
    subject = subject_of(user_id, settings.batch.subject_key)
    forgotten = F.col(FORGOTTEN)
    record_suppression(settings.kafka, request)
    silver = silver_path(settings, spec)
    days = _days(spark, silver, user_id, subject, spec.identity)
    tables = {
        "bronze": _erase(
            spark,
            bronze_path(settings, spec),
            user_id,
            record_rows(forgotten, spec.identity),
        ),
        "rejects": _erase(
            spark,
            rejects_path(settings, spec),
            user_id,
            record_rows(forgotten, spec.identity, "raw"),
        ),
        "silver": _erase(
            spark,
            silver,
            user_id,
            event_rows(forgotten, spec.identity),
            purge_where=days_predicate("event_date", days) if days else None,
            metadata={
                "forget": subject,
                "request_id": run_id,
                "days": [d.isoformat() for d in days],
            },
        ),
        "staging": erasure_of(
            erase_staging(
                spark,
                settings,
                spec,
                user_id,
                lambda columns: parsed_rows(forgotten, spec.identity, columns),
            )
        ),
    }
    ledger = Ledger(spark, settings, spec)
    last = ledger.last("silver")
    if days and last is not None:
        ledger.append(
            Entry(
                "silver",
                run_id,
                datetime.now(UTC),
                days,
                last.as_of,
                detail={
                    "bronze_end": last.detail.get("bronze_end", {}),
                    "forget": subject,
                    "deleted": tables["silver"].rows_deleted,
                },
                consumed=(),
            )
        )
    run = ForgetRun(subject, run_id, days, tables, time.monotonic() - started)
    log_event(_log, "forget.done", pipeline=spec.name, **run.report())
    return run
