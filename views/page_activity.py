"""Page activity per page per minute: views, visitors and load times."""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.common import minute_window, visitors_sketch, window_start
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SPEC", "build_page_activity"]


def build_page_activity(events: DataFrame) -> DataFrame:
    """Page views, visitors and load-time statistics per page path per minute.

    Input: parsed, deduplicated events (contract schema plus ``event_time``).
    Page calls (``type == "page"``) are keyed by ``properties.path``, else
    ``context.page.path``; a page call with neither is left out. Load-time
    measures cover the page views that reported ``properties.load_time_ms``;
    ``load_sum`` and ``load_max`` are null in a window without any.

    Pure: works unchanged on a batch and on a (watermarked) streaming DataFrame.
    """
    from pyspark.sql import functions as F

    path = F.coalesce(F.col("properties.path"), F.col("context.page.path"))
    load = F.col("properties.load_time_ms")
    pages = events.where(F.col("type") == "page").withColumn("_path", path)
    return (
        pages.where(F.col("_path").isNotNull())
        .groupBy(minute_window(), F.col("_path").alias("path"))
        .agg(
            F.count(F.lit(1)).alias("page_views"),
            visitors_sketch().alias("visitors"),
            F.count(load).alias("load_count"),
            F.sum(load).alias("load_sum"),
            F.max(load).alias("load_max"),
            F.kll_sketch_agg_double(load).alias("load_sketch"),
        )
        .select(window_start(), *SPEC.columns[1:])
    )


SPEC = ViewSpec(
    name="page_activity",
    keys=("path",),
    measures=(
        Measure("page_views", "count", "Page views."),
        Measure("visitors", "hll", "Distinct visitors (userId, else anonymousId) who viewed it."),
        Measure("load_count", "count", "Page views that reported a load time."),
        Measure("load_sum", "sum", "Sum of load times, ms (mean = load_sum / load_count)."),
        Measure("load_max", "max", "Slowest load time, ms."),
        Measure("load_sketch", "kll", "KLL sketch of load times, ms (p50, p95 ...)."),
    ),
    build=build_page_activity,
    description="Per page path per minute: page views, unique visitors, load times.",
)
