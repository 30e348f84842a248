"""Silver: bronze parsed with the contract, deduplicated exactly, by event date.

Every bronze record ends in exactly one place:

- ``silver/<topic>``: one row per event, identified by the contract's key
  ``(source_id, event_id)`` (the first record of it in the log, by partition
  and offset), the contract's typed columns, the whole event as received in
  ``payload`` (a ``VARIANT``: custom properties and context included, queried
  as ``payload:properties.revenue::double``), ``event_time``
  (the skew-corrected timestamp) and ``event_date``, partitioned by
  ``event_date``; late events land in their true day.
- ``silver/<topic>_rejects``: records that do not parse as the contract's
  event, or whose event time lies more than the tolerance ahead of their
  ``receivedAt`` (:mod:`core.event_time`), with the raw value, the Kafka
  coordinates and the reason.

A run rewrites whole ``event_date`` partitions with ``replaceWhere``, so
reprocessing a day rewrites that day and nothing else, and a rerun writes
the same rows. Records of suppressed (forgotten) users are left out of both
tables (:func:`read_bronze`), so no rebuild or backfill brings them back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

from batch_layer.bronze import bronze_as_of, bronze_path, committed_range
from batch_layer.ledger import Entry, Ledger
from batch_layer.pipelines import PipelineSpec
from batch_layer.tables import ensure_table_properties
from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import EventTimeSettings, Settings
from core.suppressions import read_suppressions
from data_contracts import load_contract
from views.input import parse_records

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "SilverRun",
    "build_silver",
    "days_predicate",
    "number_copies",
    "parse_bronze",
    "read_bronze",
    "rejects_path",
    "silver_path",
]

_log = get_logger(__name__)

DEFAULT_FUTURE_TOLERANCE = timedelta(seconds=EventTimeSettings().future_tolerance_s)
"""The tolerance of the default settings (``settings.event_time.future_tolerance_s``)."""


@dataclass(frozen=True)
class SilverRun:
    path: str
    dates: tuple[date, ...]
    events: int
    rejects: int
    duplicates: int


def silver_path(settings: Settings, spec: PipelineSpec) -> str:
    return f"{settings.lake.root.rstrip('/')}/silver/{spec.table_name(settings)}"


def rejects_path(settings: Settings, spec: PipelineSpec) -> str:
    return silver_path(settings, spec) + "_rejects"


def read_bronze(spark: SparkSession, settings: Settings, spec: PipelineSpec) -> DataFrame:
    """Bronze without the records of suppressed users: what silver and its gate read."""
    from batch_layer.suppressed import without_suppressed

    bronze = spark.read.format("delta").load(bronze_path(settings, spec))
    return without_suppressed(bronze, read_suppressions(settings.kafka))


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


def number_copies(events: DataFrame, key: Sequence[str]) -> DataFrame:
    """``events`` with ``copy``: 1 for each event's first record in the log, 2, 3...

    An event is identified by the contract's ``key`` (``(source_id,
    event_id)``: two sources may send the same message id). The first by
    (partition, offset) over *all* of bronze: a resent event whose corrected
    time moved across midnight still has exactly one silver row, the first
    copy, on the first copy's day. Silver and its gate both count copies this
    way.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy(*key).orderBy("partition", "offset")
    return events.withColumn("copy", F.row_number().over(first))


def _rows_written(spark: SparkSession, path: str) -> int:
    """Rows the table's latest ``WRITE`` commit wrote (``numOutputRows``): this run's write.

    The latest of its last few commits, as an auto-compaction may follow the write.
    """
    from delta.tables import DeltaTable

    for commit in DeltaTable.forPath(spark, path).history(5).collect():
        if commit.operation == "WRITE":
            return int((commit.operationMetrics or {}).get("numOutputRows", 0))
    raise RuntimeError(f"No WRITE among the last commits of {path}.")


def _after(end: dict[int, int]) -> Column:
    """Bronze rows past the offsets ``end`` (every row when ``end`` is empty)."""
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for partition, offset in end.items():
        condition = F.when(F.col("partition") == partition, F.col("offset") >= offset).otherwise(
            condition
        )
    return condition


def build_silver(
    spark: SparkSession,
    settings: Settings,
    dates: list[date] | None = None,
    *,
    spec: PipelineSpec,
    run_id: str = "manual",
) -> SilverRun:
    """Rebuild silver for the event days of bronze records not seen yet, and ``dates``.

    Records the run in the pipeline ledger (days, the bronze range it has
    seen and bronze's ``as_of``), which is where gold finds its work.
    """
    from pyspark.sql import functions as F

    path = silver_path(settings, spec)
    ledger = Ledger(spark, settings, spec)
    _, bronze_end = committed_range(spark, bronze_path(settings, spec))
    as_of = bronze_as_of(spark, bronze_path(settings, spec))
    bronze = read_bronze(spark, settings, spec)
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    events, rejects = parse_bronze(bronze, spec, tolerance, payload=True)
    # The days of bronze records no silver run has seen are always rebuilt, also in
    # a backfill: this run records bronze's end as seen, so nothing may be left out.
    last = ledger.last("silver")
    seen = {int(p): o for p, o in (last.detail.get("bronze_end", {}) if last else {}).items()}
    fresh = events.where(_after(seen))
    fresh_days = [r.event_date for r in fresh.select("event_date").distinct().collect()]
    wanted = tuple(sorted(set(fresh_days) | set(dates or ())))
    # Dedupe over all of bronze, then keep the wanted days. Not cached: with the
    # payload, a day's events outgrow a laptop driver's cache, so the counts come
    # from the write's commit and from a second pass that reads only the keys.
    key = load_contract(spec.contract, spec.contract_major).key
    in_days = F.col("event_date").isin(list(wanted))
    if wanted:
        chosen = number_copies(events, key).where(in_days & (F.col("copy") == 1))
        (
            chosen.drop("copy", "partition", "offset")
            .write.format("delta")
            .mode("overwrite")
            .partitionBy("event_date")
            .option("replaceWhere", days_predicate("event_date", wanted))
            .option("mergeSchema", "true")  # a silver table older than a column it now has
            .save(path)
        )
    rejects.write.format("delta").mode("overwrite").save(rejects_path(settings, spec))
    copies = number_copies(events.select(*key, "partition", "offset", "event_date"), key)
    run = SilverRun(
        path,
        wanted,
        _rows_written(spark, path) if wanted else 0,
        spark.read.format("delta").load(rejects_path(settings, spec)).count(),
        copies.where(in_days & (F.col("copy") > 1)).count() if wanted else 0,
    )
    ensure_table_properties(spark, settings, path, rejects_path(settings, spec))
    ledger.append(
        Entry(
            "silver",
            run_id,
            datetime.now(UTC),
            wanted,
            as_of,
            detail={
                "bronze_end": bronze_end,
                "events": run.events,
                "duplicates": run.duplicates,
                "rejects": run.rejects,
            },
            consumed=(),  # silver's work comes from bronze's offsets, not from the ledger
        )
    )
    log_event(
        _log,
        "silver.built",
        path=run.path,
        run_id=run_id,
        dates=[d.isoformat() for d in run.dates],
        events=run.events,
        rejects=run.rejects,
        duplicates=run.duplicates,
    )
    return run
