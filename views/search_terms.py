"""Site searches per normalised query per minute."""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.common import minute_window, normalise_query, window_start
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SEARCHED", "SPEC", "build_search_terms"]

SEARCHED = "Site Searched"
"""The track event a search is (properties ``query`` and ``results_count``)."""


def build_search_terms(events: DataFrame) -> DataFrame:
    """ "Site Searched" track events per normalised query per minute.

    Input: parsed, deduplicated events (contract schema plus ``event_time``).
    The query is ``properties.query`` lower-cased, trimmed, with inner
    whitespace collapsed (``"  Kafka   API "`` -> ``"kafka api"``). A search
    without a query is left out.

    Pure: works unchanged on a batch and on a (watermarked) streaming DataFrame.
    """
    from pyspark.sql import functions as F

    query = normalise_query(F.col("properties.query"))
    return (
        events.where((F.col("type") == "track") & (F.col("event") == SEARCHED))
        .withColumn("_query", query)
        .where(F.col("_query").isNotNull())
        .groupBy(minute_window(), F.col("_query").alias("query"))
        .agg(F.count(F.lit(1)).alias("searches"))
        .select(window_start(), *SPEC.columns[1:])
    )


SPEC = ViewSpec(
    name="search_terms",
    keys=("query",),
    measures=(Measure("searches", "count", "Site Searched events."),),
    build=build_search_terms,
    description="Per normalised search query per minute: searches.",
)
