"""Gold: the shared views, computed exactly from silver, one Delta table per view.

The same view functions as the speed layer (:mod:`views`), applied to the
complete, deduplicated events of whole days, so the answers are exact: late
events are in their true windows. Each view's table is partitioned by
``window_date`` and a run rewrites exactly the days it covers
(``replaceWhere``): reprocessing a day rewrites that day and nothing else.
"""

from __future__ import annotations

from datetime import date
from typing import TYPE_CHECKING

from batch_layer.silver import days_predicate, silver_path
from core.log import get_logger, log_event
from core.settings import Settings
from views import VIEWS, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["build_gold", "gold_path"]

_log = get_logger(__name__)


def gold_path(settings: Settings, spec: ViewSpec) -> str:
    return f"{settings.lake.root.rstrip('/')}/gold/{spec.name}"


def build_gold(
    spark: SparkSession, settings: Settings, dates: list[date], views: tuple[ViewSpec, ...] = VIEWS
) -> dict[str, int]:
    """Rewrite every view's gold partitions for ``dates``; return rows written per view."""
    from pyspark.sql import functions as F

    if not dates:
        return {}
    days = sorted(set(dates))
    silver = spark.read.format("delta").load(silver_path(settings))
    events = silver.where(F.col("event_date").isin(days))
    predicate = days_predicate("window_date", days)
    written = {}
    for spec in views:
        rows = spec.build(events).withColumn("window_date", F.to_date("window_start"))
        (
            rows.write.format("delta")
            .mode("overwrite")
            .partitionBy("window_date")
            .option("replaceWhere", predicate)
            .save(gold_path(settings, spec))
        )
        written[spec.name] = (
            spark.read.format("delta").load(gold_path(settings, spec)).where(predicate).count()
        )
    log_event(_log, "gold.built", dates=[d.isoformat() for d in days], rows=written)
    return written
