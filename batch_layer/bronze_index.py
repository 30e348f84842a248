"""Where in bronze each event day's records are: an index from Kafka offsets to event days.

Bronze is the log in arrival order (partitioned by ``ingest_date``); an event
day's records are mostly in that day's ingest, plus late ones in the days
after. So that a backfill of a day reads only the records that can fall on it,
silver records, for every run, the offset range of each day's events per Kafka
partition: ``(event_date, partition, first_offset, last_offset, records)`` in
``_pipelines/<P>/bronze_index``. A backfill of day D reads the bronze rows in
D's ranges; Delta skips every bronze file whose ``partition``/``offset``
statistics lie outside them (a file holds one Kafka partition's contiguous
offsets of one run). The ranges are a superset (a range holds other days'
records between D's first and last one); silver keeps only D's.

Silver appends the index rows of a run in the same run, before it records its
ledger entry, with Delta's idempotent-write pair, so the index covers every
offset silver has seen. A table from a release without the index gets it
built from bronze once (:func:`batch_layer.silver.build_silver`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import TYPE_CHECKING

from core.settings import Settings
from pipelines import PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["between", "in_ranges", "index_path", "merge_ranges", "ranges_of", "record_index"]


def index_path(settings: Settings, spec: PipelineSpec) -> str:
    return f"{settings.lake.root.rstrip('/')}/_pipelines/{spec.name}/bronze_index"


def merge_ranges(ranges: Iterable[tuple[int, int, int]]) -> dict[int, list[tuple[int, int]]]:
    """Per Kafka partition, the inclusive offset ranges of ``(partition, first, last)``,
    sorted, overlapping or touching ones merged.

    >>> merge_ranges([(0, 10, 20), (0, 21, 30), (0, 40, 50), (1, 5, 6), (0, 45, 60)])
    {0: [(10, 30), (40, 60)], 1: [(5, 6)]}
    """
    merged: dict[int, list[tuple[int, int]]] = {}
    for partition, first, last in sorted(ranges):
        spans = merged.setdefault(partition, [])
        if spans and first <= spans[-1][1] + 1:
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, last))
    return merged


def in_ranges(ranges: dict[int, list[tuple[int, int]]]) -> Column:
    """Rows whose ``(partition, offset)`` lie in ``ranges`` (inclusive); none when empty.

    A plain OR of comparisons, so that Delta's data skipping can use it.
    """
    from pyspark.sql import functions as F

    condition = F.lit(False)
    for partition, spans in sorted(ranges.items()):
        for first, last in spans:
            condition = condition | (
                (F.col("partition") == partition) & F.col("offset").between(first, last)
            )
    return condition


def between(start: dict[int, int], end: dict[int, int]) -> Column:
    """Rows at or after ``start`` and before ``end`` per Kafka partition (``start`` defaults
    to 0); none when every partition's range is empty."""
    return in_ranges(
        {p: [(start.get(p, 0), stop - 1)] for p, stop in end.items() if start.get(p, 0) < stop}
    )


def ranges_of(
    spark: SparkSession, settings: Settings, spec: PipelineSpec, days: Iterable[date]
) -> dict[int, list[tuple[int, int]]]:
    """The bronze offset ranges holding the events of ``days`` (none for a day without any)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    path, days = index_path(settings, spec), sorted(set(days))
    if not days or not DeltaTable.isDeltaTable(spark, path):
        return {}
    rows = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("event_date").isin(days))
        .select("partition", "first_offset", "last_offset")
        .collect()
    )
    return merge_ranges((r.partition, r.first_offset, r.last_offset) for r in rows)


def index_rows(records: DataFrame) -> DataFrame:
    """The index rows of parsed records (``partition``, ``offset``, ``event_date``: null for a
    reject, which belongs to no day)."""
    from pyspark.sql import functions as F

    return (
        records.where(F.col("event_date").isNotNull())
        .groupBy("event_date", "partition")
        .agg(
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.count("*").alias("records"),
        )
    )


def record_index(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    records: DataFrame,
    version: int,
    run_id: str,
) -> None:
    """Append the index rows of ``records``; a second write of the same ``version`` is skipped
    (Delta's ``txnAppId``/``txnVersion``), so a rerun does not repeat them."""
    (
        index_rows(records)
        .coalesce(1)
        .write.format("delta")
        .mode("append")
        .option("txnAppId", f"bronze_index:{spec.name}")
        .option("txnVersion", version)
        .option("userMetadata", run_id)
        .save(index_path(settings, spec))
    )
