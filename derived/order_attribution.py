"""``order_attribution``: the shop's orders attributed to the campaigns that brought them,
per campaign, currency and day; from the shop's checkouts and the website's sessions.

**Last touch, 7 days.** A completed order is attributed to the campaign of its buyer's
last web session with a campaign that started at most :data:`LOOKBACK` before the
order (and not after it): the buyer is the checkout's ``buyer_id``, a session's the
``user_id`` it carried (a visit before any login cannot be attributed). Sessions
that start at the same instant are ordered by ``session_id``. An order no such
session precedes is counted under the campaign ``(none)``.

**Per day** (the order's UTC day), campaign (name, source, medium) and currency
(amounts are minor units of their currency, never converted): ``orders`` and
``revenue_minor`` attributed, the campaign's ``sessions`` that day, and
``conversion_rate``, orders per session of the campaign that day (null where the
campaign had no session that day). A campaign with sessions and no order that day
has one row with no currency, 0 orders and rate 0. Summing a campaign's rows of a
day over currencies gives its orders per session.

**Late events and refunds.** An order's day is read with the 7 days of sessions
before it (``reach_days=7`` on ``web_sessions``): a late web event rebuilds its
session's day, and so the 8 days of orders it can reach; a late order rebuilds its
own day. Refunds are not attributed: revenue here is what a campaign brought at
checkout (net revenue per currency is the shop's ``orders_by_currency``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame

__all__ = ["LOOKBACK", "NONE", "READS", "build"]

LOOKBACK = timedelta(days=7)
"""How long before an order a session with a campaign can be the one that brought it."""
NONE = "(none)"
"""The campaign of an order no session with a campaign preceded within the lookback."""

READS = {
    "checkouts": ("event_id", "type", "buyer_id", "amount_minor", "currency", "event_time"),
    "web_sessions": (
        "session_id",
        "session_date",
        "user_id",
        "started_at",
        "campaign_name",
        "campaign_source",
        "campaign_medium",
    ),
}

_CAMPAIGN = ("campaign_name", "campaign_source", "campaign_medium")


def build(inputs: Mapping[str, DataFrame]) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    orders = inputs["checkouts"].where(F.col("type") == "order_completed")
    sessions = inputs["web_sessions"].where(F.col("campaign_name").isNotNull())
    touches = sessions.where(F.col("user_id").isNotNull()).select(
        "user_id", "session_id", "started_at", *_CAMPAIGN
    )
    lookback_us = LOOKBACK // timedelta(microseconds=1)
    started, ordered = F.unix_micros("started_at"), F.unix_micros("event_time")
    within = (
        (F.col("user_id") == F.col("buyer_id"))
        & (started <= ordered)
        & (started >= ordered - F.lit(lookback_us))
    )
    candidates = orders.join(touches, within, "left")
    last = Window.partitionBy("event_id").orderBy(F.desc("started_at"), F.desc("session_id"))
    attributed = (
        candidates.withColumn("n", F.row_number().over(last))
        .where(F.col("n") == 1)
        .select(
            F.to_date("event_time").alias("attribution_date"),
            *(F.coalesce(F.col(c), F.lit(NONE)).alias(c) for c in _CAMPAIGN),
            "currency",
            "amount_minor",
        )
    )
    sold = attributed.groupBy("attribution_date", *_CAMPAIGN, "currency").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount_minor").alias("revenue_minor")
    )
    visits = sessions.groupBy(F.col("session_date").alias("attribution_date"), *_CAMPAIGN).agg(
        F.count(F.lit(1)).alias("sessions")
    )
    rows = sold.join(visits, ["attribution_date", *_CAMPAIGN], "full")
    orders_made = F.coalesce(F.col("orders"), F.lit(0))
    return rows.select(
        "attribution_date",
        *_CAMPAIGN,
        "currency",
        orders_made.alias("orders"),
        F.coalesce(F.col("revenue_minor"), F.lit(0)).cast("long").alias("revenue_minor"),
        F.col("sessions").cast("long").alias("sessions"),
        (orders_made / F.col("sessions")).alias("conversion_rate"),
    )
