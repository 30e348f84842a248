"""One silver run's reconciliation figures, for the silver gate (:mod:`batch_layer.quality`).

Two ways to the same figures (bronze's records of the run's range, the records the run
read, its events, the silver rows holding them, the copies it dropped and those whose
key silver does not hold within a day, its rejects and those the rejects table holds):

- :func:`observed_figures`: the run's side as silver observed it while it staged and
  wrote (its ledger entry), the tables' side counted by the run's Kafka range;
- :func:`counted_figures`: both sides counted again from the run's staging folder and
  the tables, without the records of suppressed users.

:func:`silver_run_figures` takes the first while the suppression list is the one the
run read and the run rebuilt no day, the second otherwise.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING, Any

from batch_layer.bronze import bronze_path
from batch_layer.bronze_index import between
from batch_layer.dedupe import NEAR_DAYS, neighbour_days
from batch_layer.ledger import Entry
from batch_layer.silver import rejects_path, silver_path, suppression_mark
from batch_layer.staging import new_reject, read_run, run_event
from batch_layer.suppressed import without_suppressed, without_suppressed_parsed
from core.settings import Settings
from core.suppressions import Suppressions
from data_contracts import load_contract
from pipelines import PipelineSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["counted_figures", "observed_figures", "silver_run_figures"]


def silver_run_figures(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    entry: Entry,
    suppressions: Suppressions,
) -> dict[str, Any] | None:
    """One silver run's figures: from what the run observed while it wrote where they still
    hold (:func:`observed_figures`), else counted again (:func:`counted_figures`); None when
    the run's staging folder is gone and it has to be counted again."""
    mark = entry.detail.get("suppressions")
    if (
        mark is not None
        and mark == suppression_mark(suppressions, spec)
        and not entry.detail.get("rebuilt")
    ):
        observed = observed_figures(spark, settings, spec, entry, suppressions.of(spec.name))
        if observed is not None:
            return observed
    return counted_figures(spark, settings, spec, entry, suppressions.of(spec.name))


def observed_figures(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    entry: Entry,
    suppressed: frozenset[str],
) -> dict[str, Any] | None:
    """The run's own figures, observed while it staged and wrote (its ledger entry: bronze
    records read, events, rejects, copies dropped), against the tables' rows of its Kafka
    range: bronze's records, silver's rows on its days and the rejects, each a count of two
    columns that Delta's file statistics prune to the run's files; and, when the run dropped
    copies, their keys looked up in silver within a day of them. One Spark action.

    Holds while the suppression list is as the run read it (no forget since, which would
    erase rows from the tables and staging) and the run rebuilt no day (a rebuilt day's rows
    are the index's records, not one Kafka range): the caller checks both. None when the
    run's staging folder, which holds its copies, is gone.
    """
    from pyspark.sql import functions as F

    from data_contracts.derive.one_pass_query import one_row_values

    detail = entry.detail
    start = {int(p): o for p, o in detail.get("bronze_start", {}).items()}
    end = {int(p): o for p, o in detail["bronze_end"].items()}
    in_range = between(start, end)
    bronze = spark.read.format("delta").load(bronze_path(settings, spec)).where(in_range)
    bronze = without_suppressed(bronze, suppressed, spec.identity)
    silver = spark.read.format("delta").load(silver_path(settings, spec))
    held = silver.where(F.col("event_date").isin(list(entry.days)) & in_range)
    recorded = spark.read.format("delta").load(rejects_path(settings, spec)).where(in_range)
    count = F.count(F.lit(1))
    parts = [
        bronze.agg(count.alias("bronze")),
        held.agg(count.alias("held")),
        recorded.agg(count.alias("recorded")),
    ]
    copies = int(detail["duplicates"])
    if copies:
        run = read_run(spark, detail["staging"])
        if run is None or run[1] is None:
            return None
        staged, coordinates = run
        key = list(load_contract(spec.contract, spec.contract_major).key)
        copied = (
            staged.join(F.broadcast(coordinates), ["partition", "offset"], "left_semi")
            .select(*key, "event_date", "partition", "offset")
            .alias("copy")
        )
        near = silver.where(F.col("event_date").isin(list(neighbour_days(entry.days))))
        kept = near.select(*key, F.col("event_date").alias("kept_on")).alias("kept")
        found = (
            F.broadcast(copied)
            .join(
                kept,
                [F.col(f"copy.{k}") == F.col(f"kept.{k}") for k in key]
                + [F.abs(F.datediff("copy.event_date", "kept.kept_on")) <= NEAR_DAYS],
            )
            .select("copy.partition", "copy.offset")
            .distinct()
        )
        parts.append(found.agg(count.alias("found")))
    counted = {k: int(v) for k, v in one_row_values(parts).items()}
    return {
        "way": "observed",
        "bronze": counted["bronze"],
        "records": int(detail["records"]),
        "events": int(detail["candidates"]),
        "held": counted["held"],
        "copies": copies,
        "orphans": copies - counted.get("found", 0),
        "rejects": int(detail["rejects"]),
        "recorded": counted["recorded"],
    }


def counted_figures(
    spark: SparkSession,
    settings: Settings,
    spec: PipelineSpec,
    entry: Entry,
    suppressed: frozenset[str],
) -> dict[str, Any] | None:
    """One silver run's figures, counted from its staging folder and the tables: bronze's
    records of its range, staging's records, events and rejects, the events silver holds
    (found by their Kafka coordinates), the copies silver dropped (staging's ``copies``) and
    those of them whose key silver does not hold within a day (orphans), and the rejects
    the rejects table holds. None when the staging folder is gone.

    Both sides leave out the records of the ``suppressed`` users: a user
    forgotten after the run is gone from bronze, silver and the rejects, and
    from staging too (``forget`` erases it; left out here as well, so the
    counts balance at any point of an erasure). Reads the run's new bronze
    offsets (two columns), the staging folder's small columns and silver's
    keys on the run's days: the cost of the run, not of the tables.
    """
    from pyspark.sql import functions as F

    from data_contracts.derive.one_pass_query import one_row_values

    run = read_run(spark, entry.detail["staging"])
    if run is None:
        return None
    staged, copies = run
    staged = without_suppressed_parsed(staged, suppressed, spec.identity)
    key = list(load_contract(spec.contract, spec.contract_major).key)
    start = {int(p): o for p, o in entry.detail.get("bronze_start", {}).items()}
    end = {int(p): o for p, o in entry.detail["bronze_end"].items()}
    rebuilt = [date.fromisoformat(d) for d in entry.detail.get("rebuilt", [])]
    bronze = spark.read.format("delta").load(bronze_path(settings, spec))
    bronze = without_suppressed(bronze.where(between(start, end)), suppressed, spec.identity)
    events = staged.where(run_event(rebuilt)).select(*key, "event_date", "partition", "offset")
    silver = spark.read.format("delta").load(silver_path(settings, spec))
    near = silver.where(F.col("event_date").isin(list(neighbour_days(entry.days))))
    held = near.select("partition", "offset")
    dropped = events.join(held, ["partition", "offset"], "left_anti").alias("copy")
    kept = near.select(*key, F.col("event_date").alias("kept_on")).alias("kept")
    orphans = dropped.join(
        kept,
        [F.col(f"copy.{k}") == F.col(f"kept.{k}") for k in key]
        + [F.abs(F.datediff("copy.event_date", "kept.kept_on")) <= NEAR_DAYS],
        "left_anti",
    )
    rejects = staged.where(new_reject()).select("partition", "offset")
    recorded = spark.read.format("delta").load(rejects_path(settings, spec))
    figures = [  # every figure in one Spark action
        bronze.agg(F.count(F.lit(1)).alias("bronze")),
        staged.agg(
            F.count_if("fresh").alias("fresh"),
            F.count_if(run_event(rebuilt)).alias("events"),
            F.count_if(new_reject()).alias("rejects"),
        ),
        dropped.agg(F.count(F.lit(1)).alias("dropped")),
        orphans.agg(F.count(F.lit(1)).alias("orphans")),
        rejects.join(recorded, ["partition", "offset"], "left_semi").agg(
            F.count(F.lit(1)).alias("recorded")
        ),
    ]
    if copies is not None:
        copied = events.join(copies, ["partition", "offset"], "left_semi")
        figures.append(copied.agg(F.count(F.lit(1)).alias("copies")))
    counted = {k: int(v) for k, v in one_row_values(figures).items()}
    # A folder from before staging kept its copies: the count the run recorded.
    n_copies = counted["copies"] if copies is not None else int(entry.detail.get("duplicates", 0))
    return {
        "way": "counted",
        "bronze": counted["bronze"],
        "records": counted["fresh"],
        "events": counted["events"],
        "held": counted["events"] - counted["dropped"],
        "copies": n_copies,
        "orphans": counted["orphans"],
        "rejects": counted["rejects"],
        "recorded": counted["recorded"],
    }
