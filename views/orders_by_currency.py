"""Orders per currency per minute: orders, refunds, revenue, distinct buyers, order values.

A view of the ``checkouts`` pipeline (``pipelines/declared/checkouts.py``) over
the checkout service's events (``data_contracts/checkouts``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.common import HLL_LG_K, minute_window, window_start
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["SPEC", "build_orders_by_currency"]


def build_orders_by_currency(events: DataFrame) -> DataFrame:
    """Per currency per minute: completed orders, refunds, revenue (completed amounts minus
    refunded ones, in minor units), distinct buyers of completed orders and a KLL sketch of
    completed order values.

    Pure: works unchanged on a batch and on a (watermarked) streaming DataFrame.
    """
    from pyspark.sql import functions as F

    completed = F.col("type") == "order_completed"
    refunded = F.col("type") == "order_refunded"
    amount = F.col("amount_minor")
    return (
        events.where(completed | refunded)
        .groupBy(minute_window(), F.col("currency"))
        .agg(
            F.count(F.when(completed, 1)).alias("orders"),
            F.count(F.when(refunded, 1)).alias("refunds"),
            # A sum measure is a double in both layers (views.kinds); exact below 2**53.
            F.sum(F.when(completed, amount).otherwise(-amount).cast("double")).alias(
                "revenue_minor"
            ),
            F.hll_sketch_agg(F.when(completed, F.col("buyer_id")), HLL_LG_K).alias("buyers"),
            F.kll_sketch_agg_double(F.when(completed, amount.cast("double"))).alias("order_value"),
        )
        .select(window_start(), *SPEC.columns[1:])
    )


SPEC = ViewSpec(
    name="orders_by_currency",
    keys=("currency",),
    measures=(
        Measure("orders", "count", "Orders completed."),
        Measure("refunds", "count", "Refunds issued."),
        Measure(
            "revenue_minor",
            "sum",
            "Completed amounts minus refunded ones, minor units (below zero in a minute "
            "that refunds more than it sells).",
            signed=True,
        ),
        Measure("buyers", "hll", "Distinct buyers of completed orders."),
        Measure("order_value", "kll", "KLL sketch of completed order values (p50, p95 ...)."),
    ),
    build=build_orders_by_currency,
    description="Per currency per minute: orders, refunds, revenue, buyers, order values.",
)
