"""Silver: bronze parsed with the contract, deduplicated exactly, by event date.

Every bronze record ends in exactly one place:

- ``silver/<topic>``: one row per ``event_id`` (the first record of it in the
  log, by partition and offset), the contract's columns plus ``event_time``
  (the skew-corrected timestamp) and ``event_date``, partitioned by
  ``event_date``; late events land in their true day.
- ``silver/<topic>_rejects``: records that do not parse as the contract's
  event (with the raw value, the Kafka coordinates and the reason).

A run rewrites whole ``event_date`` partitions with ``replaceWhere``, so
reprocessing a day rewrites that day and nothing else, and a rerun writes
the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from batch_layer.bronze import bronze_path
from core.log import get_logger, log_event
from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "SilverRun",
    "build_silver",
    "days_predicate",
    "parse_bronze",
    "rejects_path",
    "silver_path",
]

_log = get_logger(__name__)


@dataclass(frozen=True)
class SilverRun:
    path: str
    dates: tuple[date, ...]
    events: int
    rejects: int
    duplicates: int


def silver_path(settings: Settings) -> str:
    return bronze_path(settings).replace("/bronze/", "/silver/")


def rejects_path(settings: Settings) -> str:
    return silver_path(settings) + "_rejects"


def days_predicate(column: str, days: tuple[date, ...] | list[date]) -> str:
    """The ``replaceWhere`` predicate selecting whole date partitions.

    >>> days_predicate("event_date", [date(2024, 1, 1)])
    "event_date IN (DATE'2024-01-01')"
    """
    return f"{column} IN (" + ", ".join(f"DATE'{d.isoformat()}'" for d in days) + ")"


def parse_bronze(bronze: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(parsed events with Kafka coordinates, rejects with a reason) from bronze rows."""
    from pyspark.sql import functions as F

    from data_contracts import load_contract
    from data_contracts.derive import to_spark_schema

    schema = to_spark_schema(load_contract("web_events", 1))
    text = F.col("value").cast("string")
    parsed = bronze.select(
        "partition", "offset", text.alias("raw"), F.from_json(text, schema).alias("e")
    )
    reason = (
        F.when(F.col("e").isNull(), F.lit("unparseable"))
        .when(F.col("e.event_id").isNull(), F.lit("missing:event_id"))
        .when(F.col("e.timestamp").isNull(), F.lit("missing:timestamp"))
    )
    checked = parsed.withColumn("reason", reason)
    events = (
        checked.where(F.col("reason").isNull())
        .select("partition", "offset", "e.*")
        .withColumn("event_time", F.col("timestamp"))
        .withColumn("event_date", F.to_date("event_time"))
    )
    rejects = checked.where(F.col("reason").isNotNull()).select(
        "partition", "offset", "raw", "reason"
    )
    return events, rejects


def build_silver(
    spark: SparkSession, settings: Settings, dates: list[date] | None = None
) -> SilverRun:
    """Rebuild silver for ``dates`` (every date present in bronze when None)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    bronze = spark.read.format("delta").load(bronze_path(settings))
    events, rejects = parse_bronze(bronze)
    first = Window.partitionBy("event_id").orderBy("partition", "offset")
    ranked = events.withColumn("_n", F.row_number().over(first))
    unique = ranked.where(F.col("_n") == 1).drop("_n", "partition", "offset").cache()
    try:
        wanted = tuple(
            sorted(dates)
            if dates is not None
            else sorted(r.event_date for r in unique.select("event_date").distinct().collect())
        )
        if not wanted:
            return SilverRun(silver_path(settings), (), 0, 0, 0)
        in_scope = F.col("event_date").isin(list(wanted))
        chosen = unique.where(in_scope)
        predicate = days_predicate("event_date", wanted)
        (
            chosen.write.format("delta")
            .mode("overwrite")
            .partitionBy("event_date")
            .option("replaceWhere", predicate)
            .save(silver_path(settings))
        )
        rejects.write.format("delta").mode("overwrite").save(rejects_path(settings))
        run = SilverRun(
            silver_path(settings),
            wanted,
            chosen.count(),
            spark.read.format("delta").load(rejects_path(settings)).count(),
            ranked.where(in_scope & (F.col("_n") > 1)).count(),
        )
    finally:
        unique.unpersist()
    log_event(
        _log,
        "silver.built",
        path=run.path,
        dates=[d.isoformat() for d in run.dates],
        events=run.events,
        rejects=run.rejects,
        duplicates=run.duplicates,
    )
    return run
