"""``web_sessions``: the website's visits, one row per session, from the web events' silver.

A session is one visitor's run of events with no gap of more than 30 minutes
(:data:`INACTIVITY`). The visitor is the browser (``anonymousId``; ``userId``
where none was sent), so logging in mid-visit does not start a new session;
``user_id`` is the last ``userId`` the session carried. **A session ends at
midnight UTC**, as sessions do in Google Analytics' Universal Analytics: a visit
across midnight is two sessions, one on each day. A day's sessions then depend
on that day's events alone, so rebuilding day D reads day D of silver and a
late event changes only its own day.

Per session: its id (its first event's ``source_id/event_id``: stable across
rebuilds and no digest of a person), start, end and duration, events and page
views, the landing page (the first page view's path), and the referrer,
campaign and device (from the user agent) of its first event, and whether it
ended in a checkout (it holds an ``Order Completed`` event, Segment's
e-commerce spec). Events of the same instant are ordered by ``source_id``,
then ``event_id``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import DataFrame

__all__ = ["CHECKOUT_EVENT", "INACTIVITY", "READS", "build", "device_of"]

INACTIVITY = timedelta(minutes=30)
"""A gap longer than this between two events of a visitor starts a new session."""
CHECKOUT_EVENT = "Order Completed"
"""The track event a site sends when a checkout completes (Segment's e-commerce spec)."""

READS = {
    "web_events": (
        "source_id",
        "event_id",
        "anonymousId",
        "userId",
        "type",
        "event",
        "event_time",
        "event_date",
        "properties.path",
        "properties.referrer",
        "context.page.path",
        "context.page.referrer",
        "context.campaign.name",
        "context.campaign.source",
        "context.campaign.medium",
        "context.userAgent",
    )
}

_MOBILE = ("Mobile", "Android", "iPhone", "iPad")


def device_of(user_agent: str | None) -> str | None:
    """``mobile`` or ``desktop`` from a user agent (None without one): the rule
    :func:`build` applies in Spark.

    >>> device_of("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X)"), device_of("curl/8")
    ('mobile', 'desktop')
    """
    if user_agent is None:
        return None
    return "mobile" if any(word in user_agent for word in _MOBILE) else "desktop"


def build(inputs: Mapping[str, DataFrame]) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    events = inputs["web_events"].withColumn(
        "visitor_id", F.coalesce(F.col("anonymousId"), F.col("userId"))
    )
    order = F.struct("event_time", "source_id", "event_id")
    by_visitor_day = Window.partitionBy("visitor_id", "event_date").orderBy(
        "event_time", "source_id", "event_id"
    )
    gap_us = F.unix_micros("event_time") - F.unix_micros(F.lag("event_time").over(by_visitor_day))
    starts = F.coalesce(gap_us > INACTIVITY // timedelta(microseconds=1), F.lit(True))
    numbered = events.withColumn(
        "session_no",
        F.sum(starts.cast("int")).over(
            by_visitor_day.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        ),
    )
    is_page = F.col("type") == "page"
    ua = F.col("context.userAgent")
    device = F.when(ua.rlike("|".join(_MOBILE)), "mobile").when(ua.isNotNull(), "desktop")
    referrer = F.coalesce(F.col("properties.referrer"), F.col("context.page.referrer"))
    first = F.min_by(
        F.struct(
            F.concat_ws("/", "source_id", "event_id").alias("session_id"),
            F.nullif(referrer, F.lit("")).alias("referrer"),
            F.col("context.campaign.name").alias("campaign_name"),
            F.col("context.campaign.source").alias("campaign_source"),
            F.col("context.campaign.medium").alias("campaign_medium"),
            device.alias("device"),
        ),
        order,
    )
    landing = F.min_by(
        F.coalesce(F.col("properties.path"), F.col("context.page.path")),
        F.when(is_page, order),
    )
    sessions = numbered.groupBy("visitor_id", "event_date", "session_no").agg(
        first.alias("first"),
        F.max_by("userId", F.when(F.col("userId").isNotNull(), order)).alias("user_id"),
        F.min("event_time").alias("started_at"),
        F.max("event_time").alias("ended_at"),
        F.count(F.lit(1)).alias("events"),
        F.count(F.when(is_page, True)).alias("pages"),
        landing.alias("landing_page"),
        F.max(
            F.coalesce(F.col("event") == CHECKOUT_EVENT, F.lit(False)) & (F.col("type") == "track")
        ).alias("converted"),
    )
    duration_ms = (F.unix_micros("ended_at") - F.unix_micros("started_at")) / 1000
    return sessions.select(
        F.col("first.session_id").alias("session_id"),
        F.col("event_date").alias("session_date"),
        "visitor_id",
        "user_id",
        "started_at",
        "ended_at",
        duration_ms.cast("long").alias("duration_ms"),
        "events",
        "pages",
        "landing_page",
        "first.referrer",
        "first.campaign_name",
        "first.campaign_source",
        "first.campaign_medium",
        "first.device",
        "converted",
    )
