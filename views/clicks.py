"""Clicks per click target per minute."""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.common import minute_window, window_start
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["CLICKED", "SPEC", "build_clicks"]

CLICKED = "Element Clicked"
"""The track event a click is (properties ``element`` and ``target``)."""


def build_clicks(events: DataFrame) -> DataFrame:
    """ "Element Clicked" track events per ``properties.target`` per minute.

    Input: parsed, deduplicated events (contract schema plus ``event_time``).
    A click without a target is left out.

    Pure: works unchanged on a batch and on a (watermarked) streaming DataFrame.
    """
    from pyspark.sql import functions as F

    target = F.col("properties.target")
    return (
        events.where((F.col("type") == "track") & (F.col("event") == CLICKED))
        .where(target.isNotNull())
        .groupBy(minute_window(), target.alias("target"))
        .agg(F.count(F.lit(1)).alias("clicks"))
        .select(window_start(), *SPEC.columns[1:])
    )


SPEC = ViewSpec(
    name="clicks",
    keys=("target",),
    measures=(Measure("clicks", "count", "Element Clicked events."),),
    build=build_clicks,
    description="Per click target (URL or name) per minute: clicks.",
)
