"""Silver: bronze parsed with the contract, deduplicated exactly, by event date.

Every bronze record ends in exactly one place:

- ``silver/<topic>``: one row per event, identified by the contract's key
  ``(source_id, event_id)`` (its first copy in the log; copies are compared
  within a day of each other, :mod:`batch_layer.dedupe`), the contract's typed
  columns, the whole event as received in ``payload`` (a ``VARIANT``: custom
  properties and context included, queried as
  ``payload:properties.revenue::double``), ``event_time`` (the skew-corrected
  timestamp), ``event_date`` and the record's Kafka ``partition`` and
  ``offset``, partitioned by ``event_date``; late events land in their true day.
- ``silver/<topic>_rejects``: records that do not parse as the contract's
  event, or whose event time lies more than the tolerance ahead of their
  ``receivedAt`` (:mod:`core.event_time`), with the raw value, the Kafka
  coordinates and the reason.

A run costs what is new, not what bronze holds: it parses the bronze records
no run has seen (found by their offsets, which Delta's file statistics prune
to the new files) once, into a staging folder the gate reads too
(:mod:`batch_layer.staging`), compares their keys with silver's rows on the
days they touch and the days next to them, and appends. A run that failed
after its append and before its ledger entry is repeated by the next run,
whose range holds the same records and whatever bronze ingested since: that
run finds the rows the failed attempt appended by their Kafka coordinates
and appends every record once (Delta's idempotent write, keyed on bronze's
run, only skips a retry when bronze did not run in between). A backfill
rewrites whole ``event_date`` partitions with ``replaceWhere`` from the
records the bronze index places on those days
(:mod:`batch_layer.bronze_index`), so reprocessing a day reads and rewrites
that day and nothing else, and a rerun writes the same rows. Records of
suppressed (forgotten) users are left out of both tables (:func:`read_bronze`),
so no rebuild or backfill brings them back.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from batch_layer.bronze import bronze_path, bronze_state
from batch_layer.bronze_index import between, in_ranges, index_path, ranges_of, record_index
from batch_layer.dedupe import copies, neighbour_days
from batch_layer.ledger import Entry, Ledger
from batch_layer.staging import (
    awaiting_gate,
    new_reject,
    on_days,
    read_records,
    run_event,
    staging_path,
    sweep,
    write_copies,
    write_records,
)
from batch_layer.tables import (
    REJECTS_PROPERTIES,
    creation_options,
    ensure_table_properties,
    silver_properties,
)
from core.event_time import EventTimeBounds
from core.frames import local_frame
from core.log import get_logger, log_event
from core.settings import EventTimeSettings, Settings
from core.suppressions import Suppressions, read_suppressions
from data_contracts import load_contract
from layout.lake import silver_path as layout_silver_path
from pipelines import PipelineSpec
from views.input import check_records, flat_records, parse_records

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SILVER_COLUMNS",
    "SilverRun",
    "build_silver",
    "days_predicate",
    "parse_bronze",
    "read_bronze",
    "rejects_path",
    "silver_path",
    "suppression_mark",
]

_log = get_logger(__name__)

DEFAULT_FUTURE_TOLERANCE = timedelta(seconds=EventTimeSettings().future_tolerance_s)
"""The tolerance of the default settings (``settings.event_time.future_tolerance_s``)."""


@dataclass(frozen=True)
class SilverRun:
    path: str
    dates: tuple[date, ...]
    events: int
    """Silver rows the run wrote (appended, or on the days it rebuilt)."""
    rejects: int
    """Rejects among the new bronze records."""
    duplicates: int
    """Copies dropped among the run's events."""
    parsed: int = 0
    """Bronze records the run read and parsed: the new ones and a rebuilt day's candidates."""
    bronze_files: tuple[int, int] = (0, 0)
    """(bronze files the run read, files bronze holds): what Delta's data skipping left."""


def silver_path(settings: Settings, spec: PipelineSpec) -> str:
    return layout_silver_path(settings, spec.topic_of(settings))


def rejects_path(settings: Settings, spec: PipelineSpec) -> str:
    return silver_path(settings, spec) + "_rejects"


def read_bronze(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    suppressions: Suppressions | None = None,
) -> DataFrame:
    """Bronze without the records of suppressed users (``suppressions``: the list as read
    now when not given): what silver and its gate read."""
    from batch_layer.suppressed import without_suppressed

    bronze = spark.read.format("delta").load(bronze_path(settings, spec))
    forgotten = (suppressions or read_suppressions(settings.kafka)).of(spec.name)
    return without_suppressed(bronze, forgotten, spec.identity)


def suppression_mark(suppressions: Suppressions, spec: PipelineSpec) -> dict[str, Any]:
    """What tells one reading of the suppression list from a later one, for ``spec``: how
    many ids it drops and when the last of them was requested (no id, no digest of one).

    A silver run records it; its gate compares it with the list it reads, and a forget
    requested in between (a new request, or a withdrawn one) shows as a different mark.
    """
    last = suppressions.last_request(spec.name)
    return {
        "count": len(suppressions.of(spec.name)),
        "last_request": last.isoformat() if last else None,
    }


def days_predicate(column: str, days: tuple[date, ...] | list[date]) -> str:
    """The ``replaceWhere`` predicate selecting whole date partitions.

    >>> days_predicate("event_date", [date(2024, 1, 1)])
    "event_date IN (DATE'2024-01-01')"
    """
    return f"{column} IN (" + ", ".join(f"DATE'{d.isoformat()}'" for d in days) + ")"


def parse_bronze(
    bronze: DataFrame,
    spec: PipelineSpec,
    future_tolerance: timedelta = DEFAULT_FUTURE_TOLERANCE,
    *,
    payload: bool = False,
) -> tuple[DataFrame, DataFrame]:
    """(parsed events with Kafka coordinates, rejects with a reason) from bronze rows.

    The views' input rules of :mod:`views.input`, with the pipeline's
    contract: the speed layer checks the live topic the same way. Callers
    pass ``EventTimeBounds.from_settings(settings).future_tolerance``;
    ``payload`` keeps the whole event (:data:`views.input.PAYLOAD`).
    """
    contract = load_contract(spec.contract, spec.contract_major)
    return parse_records(bronze, contract, future_tolerance, payload=payload)


def _stage(
    bronze: DataFrame,
    spec: PipelineSpec,
    tolerance: timedelta,
    fresh: Column,
    rebuilt: Sequence[date],
    path: str,
) -> dict:
    """Parse ``bronze`` with the contract, once, into the run's staging folder; the run's
    figures, observed while the folder is written (no pass of their own).

    Every record becomes one row (:func:`views.input.flat_records`): a valid
    event with its payload, or a reject with its raw text and reason, and
    ``fresh`` when no silver run has seen it. The steps after read only the
    columns they need from it: the keys to deduplicate, the index; silver's
    rows and rejects. The figures: records ``parsed``, the new bronze
    ``records`` among them, their ``rejects``, the run's ``events`` (new, or
    on a rebuilt day) and the ``days`` those fall on.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    contract = load_contract(spec.contract, spec.contract_major)
    checked = check_records(bronze, contract, tolerance)
    staged = flat_records(checked, payload=True).withColumn("fresh", fresh)
    event = run_event(rebuilt)
    seen = Observation()
    observed = staged.observe(
        seen,
        F.count(F.lit(1)).alias("parsed"),
        F.count_if("fresh").alias("records"),
        F.count_if(new_reject()).alias("rejects"),
        F.count_if(event).alias("events"),
        F.collect_set(F.when(event, F.col("event_date"))).alias("days"),
    )
    write_records(observed, path)
    return seen.get


def _index_history(
    spark: SparkSession, settings: Settings, spec: PipelineSpec, seen: dict[int, int], run_id: str
) -> None:
    """Build the bronze index of the offsets earlier silver runs saw (a table from a release
    without it): one parse of the records before ``seen``, once."""
    contract = load_contract(spec.contract, spec.contract_major)
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    old = read_bronze(spark, settings, spec).where(between({}, seen))
    record_index(
        spark, settings, spec, flat_records(check_records(old, contract, tolerance)), 0, run_id
    )
    log_event(_log, "silver.index_built", pipeline=spec.name, up_to=seen)


def _silver_near(
    spark: SparkSession, path: str, days: list[date], key: Sequence[str], ours: Column
) -> tuple[DataFrame, DataFrame]:
    """(the key and day of silver's rows on ``days`` from earlier runs, the coordinates of
    the rows ``ours`` selects there): empty frames when there are none.

    ``ours`` selects this run's records. An attempt that failed after its
    append left them in silver: they are not earlier copies of themselves, and
    must not be appended again (a retry's range holds them and whatever bronze
    ingested since, so Delta's idempotent write, keyed on bronze's run, does
    not skip the retry's append).
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    coordinates = "partition int, offset bigint"
    if days and DeltaTable.isDeltaTable(spark, path):
        silver = spark.read.format("delta").load(path).where(F.col("event_date").isin(days))
        if "offset" not in silver.columns:  # a table from before silver kept the coordinates
            return silver.select(*key, "event_date"), spark.createDataFrame([], coordinates)
        mine = F.coalesce(ours, F.lit(False))
        return (
            silver.where(~mine).select(*key, "event_date"),
            silver.where(mine).select("partition", "offset"),
        )
    schema = ", ".join(f"{column} string" for column in key) + ", event_date date"
    return spark.createDataFrame([], schema), spark.createDataFrame([], coordinates)


def _new_rejects(spark: SparkSession, path: str, rejects: DataFrame, ours: Column) -> DataFrame:
    """``rejects`` but those an earlier attempt of this run appended (``ours`` of the table)."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return rejects
    recorded = spark.read.format("delta").load(path).where(ours).select("partition", "offset")
    return rejects.join(recorded, ["partition", "offset"], "left_anti")


def build_silver(
    spark: SparkSession,
    settings: Settings,
    dates: list[date] | None = None,
    *,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> SilverRun:
    """Add the bronze records no silver run has seen to silver, and rebuild ``dates`` from bronze.

    The new records are parsed once (:func:`_stage`) and deduplicated
    against the silver rows of the days they fall on and their neighbours
    (:mod:`batch_layer.dedupe`), then appended to their days; the rejects
    are appended to the rejects table, and the records' offsets per event
    day to the bronze index. Each write carries Delta's idempotent-write pair
    (the bronze run the records end with), so a rerun after a failure does
    not repeat it; and the rows and rejects an earlier attempt of the same
    range appended (found by their Kafka coordinates) are not appended again
    when bronze ran in between. Folders of failed attempts are deleted first
    (:func:`batch_layer.staging.sweep`). A day of ``dates`` is rewritten whole
    (``replaceWhere``) from its candidates only: the bronze records the index
    places on it.

    Records the run in the pipeline ledger (days, the bronze range it has
    seen, bronze's ``as_of``, its counts and its staging folder), which is
    where the silver gate and gold find their work.
    """
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path = silver_path(settings, spec)
    ledger = Ledger(spark, settings, spec)
    bronze_run, bronze_end, as_of = bronze_state(spark, bronze_path(settings, spec))
    entries = ledger.entries()
    last = next((e for e in reversed(entries) if e.step == "silver"), None)
    seen = {int(p): o for p, o in (last.detail.get("bronze_end", {}) if last else {}).items()}
    sweep(spark, settings, spec, keep=awaiting_gate(entries))  # failed attempts' folders
    if seen and not DeltaTable.isDeltaTable(spark, index_path(settings, spec)):
        _index_history(spark, settings, spec, seen, run_id)
    key = load_contract(spec.contract, spec.contract_major).key
    rebuilt = sorted(set(dates or ()))
    entry_id = uuid.uuid4().hex
    staging = staging_path(settings, spec, entry_id)
    fresh = between(seen, bronze_end)
    wanted = fresh | in_ranges(ranges_of(spark, settings, spec, rebuilt)) if rebuilt else fresh
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    suppressions = read_suppressions(settings.kafka)
    bronze = read_bronze(spark, settings, spec, suppressions)
    read = bronze.where(wanted)
    files = (len(read.inputFiles()), len(bronze.inputFiles()))  # from the Delta log, pruned
    in_rebuilt = on_days(rebuilt)
    clock = time.monotonic()
    observed = _stage(read, spec, tolerance, fresh, rebuilt, staging)
    seconds = {"parse": time.monotonic() - clock}

    staged = read_records(spark, staging)
    events = staged.where(run_event(rebuilt))
    touched = sorted(observed["days"])
    near = [d for d in neighbour_days(touched) if d not in rebuilt]
    kept, written = _silver_near(spark, path, near, key, fresh)
    found = copies(events.select(*key, "event_date", "partition", "offset"), kept, key)
    copied = {(r.partition, r.offset) for r in found.collect()}
    dropped = local_frame(spark, sorted(copied), "partition int, offset bigint")
    write_copies(dropped, staging)
    seconds["dedupe"] = time.monotonic() - clock - seconds["parse"]
    chosen = events.join(F.broadcast(dropped), ["partition", "offset"], "left_anti").select(
        *[c for c in staged.columns if c not in _STAGING_ONLY], "partition", "offset"
    )
    if rebuilt:
        (
            chosen.where(in_rebuilt)
            .write.format("delta")
            .mode("overwrite")
            .partitionBy("event_date")
            .option("replaceWhere", days_predicate("event_date", rebuilt))
            .option("mergeSchema", "true")  # a silver table older than a column it now has
            .option("userMetadata", run_id)
            .save(path)
        )
    appended = [d for d in touched if d not in rebuilt]
    once = {"txnAppId": f"silver:{spec.name}", "txnVersion": bronze_run, "userMetadata": run_id}
    if appended:
        (
            chosen.where(~in_rebuilt)
            # A failed attempt's append: broadcast, so the rows are not shuffled for it.
            .join(F.broadcast(written), ["partition", "offset"], "left_anti")
            .select(*chosen.columns)
            .write.format("delta")
            .mode("append")
            .partitionBy("event_date")
            .options(**once)
            .option("mergeSchema", "true")
            .options(**creation_options(settings, silver_properties(key)))
            .save(path)
        )
    counts = {k: int(observed[k]) for k in ("parsed", "records", "rejects", "events")}
    counts["copies"] = len(copied)
    if counts["records"]:
        rejects = staged.where(new_reject())
        (
            _new_rejects(spark, rejects_path(settings, spec), rejects, fresh)
            .select("partition", "offset", "raw", "reason")
            .write.format("delta")
            .mode("append")
            .options(**once | {"txnAppId": f"silver_rejects:{spec.name}"})
            .options(**creation_options(settings, REJECTS_PROPERTIES))
            .save(rejects_path(settings, spec))
        )
        record_index(spark, settings, spec, staged.where("fresh"), bronze_run, run_id)
    seconds["write"] = time.monotonic() - clock - seconds["parse"] - seconds["dedupe"]
    days = tuple(sorted(set(touched) | set(rebuilt)))
    run = SilverRun(
        path,
        days,
        counts["events"] - counts["copies"],
        counts["rejects"],
        counts["copies"],
        counts["parsed"],
        files,
    )
    ensure_table_properties(spark, settings, path, extra=silver_properties(key))
    ensure_table_properties(spark, settings, rejects_path(settings, spec), extra=REJECTS_PROPERTIES)
    ledger.append(
        Entry(
            "silver",
            run_id,
            datetime.now(UTC),
            days,
            as_of,
            detail={
                "bronze_start": seen,
                "bronze_end": bronze_end,
                "rebuilt": [d.isoformat() for d in rebuilt],
                "staging": staging,
                "records": counts["records"],
                "parsed": counts["parsed"],
                "bronze_files": list(files),
                "candidates": counts["events"],
                "events": run.events,
                "duplicates": run.duplicates,
                "rejects": run.rejects,
                "suppressions": suppression_mark(suppressions, spec),
                "seconds": {k: round(v, 2) for k, v in seconds.items()},
            },
            consumed=(),  # silver's work comes from bronze's offsets, not from the ledger
            entry_id=entry_id,
        )
    )
    log_event(
        _log,
        "silver.built",
        path=run.path,
        run_id=run_id,
        dates=[d.isoformat() for d in run.dates],
        rebuilt=[d.isoformat() for d in rebuilt],
        records=counts["records"],
        parsed=run.parsed,
        bronze_files=list(files),
        events=run.events,
        rejects=run.rejects,
        duplicates=run.duplicates,
        seconds={k: round(v, 2) for k, v in seconds.items()},
    )
    return run


SILVER_COLUMNS = ("event_time", "event_date", "partition", "offset")
"""Silver's columns besides the contract's fields and the payload."""

_STAGING_ONLY = ("partition", "offset", "reason", "raw", "fresh")
"""Staging columns that are not silver's (silver keeps ``partition`` and ``offset`` last)."""
