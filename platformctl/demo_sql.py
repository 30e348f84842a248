"""The demo's look into silver: custom properties of a browser's order, read back with Spark SQL.

Silver keeps the whole event as received in its ``payload`` column (a
``VARIANT``), so properties and context fields the contract does not type
are one SQL path away (``payload:properties.revenue::double``).
"""

from __future__ import annotations

import re
from typing import Any

from core.settings import Settings

__all__ = ["ORDER_SQL", "order_from_silver", "rows_in_silver"]

ORDER_SQL = """
SELECT event_id, anonymousId,
       payload:properties.revenue::double AS revenue,
       payload:properties.currency::string AS currency,
       payload:properties.coupon::string AS coupon,
       payload:properties.products[1].sku::string AS second_sku,
       payload:properties.products[1].quantity::int AS second_quantity,
       payload:context.library.name::string AS library
FROM silver_web_events
WHERE event = 'Order Completed' AND payload:properties.order_id::string = '{order}'
"""
"""The demo's query; ``{order}`` is the order id of the browser's visit."""


def order_from_silver(settings: Settings, order: str) -> dict[str, Any] | None:
    """The order's row from silver (None when silver does not hold it)."""
    if not re.fullmatch(r"order-\d+", order):
        raise ValueError(f"Not a demo order id: {order!r}.")
    rows = _silver_sql(settings, ORDER_SQL.format(order=order))
    return rows[0] if rows else None


def rows_in_silver(settings: Settings, user: str) -> dict[str, int]:
    """Per pipeline that identifies people, how many of its silver rows name ``user`` in one
    of its identity fields."""
    from functools import reduce

    from pyspark.sql import functions as F

    from batch_layer.silver import silver_path
    from core.spark import build_spark_session
    from pipelines import PIPELINES

    spark = build_spark_session(settings, app_name="demo-sql")
    try:
        counts = {}
        for spec in PIPELINES:
            if spec.identity:
                silver = spark.read.format("delta").load(silver_path(settings, spec))
                named = reduce(lambda a, b: a | b, (F.col(f) == user for f in spec.identity))
                counts[spec.name] = silver.where(named).count()
        return counts
    finally:
        spark.stop()


def _silver_sql(settings: Settings, query: str) -> list[dict[str, Any]]:
    def run(silver: Any) -> list[dict[str, Any]]:
        silver.createOrReplaceTempView("silver_web_events")
        return [row.asDict() for row in silver.sparkSession.sql(query).collect()]

    return _with_silver(settings, run)


def _with_silver(settings: Settings, work: Any) -> Any:
    """``work(silver)`` on a Spark session of its own, stopped afterwards."""
    from batch_layer.silver import silver_path
    from core.spark import build_spark_session
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    spark = build_spark_session(settings, app_name="demo-sql")
    try:
        return work(spark.read.format("delta").load(silver_path(settings, WEB_EVENTS)))
    finally:
        spark.stop()
