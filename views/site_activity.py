"""Whole-site activity per minute: events, page views, sessions started, visitors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from views.common import minute_window, url_host, visitors_sketch, window_start
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["SITE", "SPEC", "build_site_activity", "session_start"]

SITE = "all"
"""The one key of the view, so it is keyed like every other view."""


def session_start() -> Column:
    """True for a page call that starts a session: it came from outside the site.

    A page view starts a session when its referrer has no host (direct
    traffic, empty or absent referrer) or a host other than the page URL's
    (search engine, social, campaign, another site). A page reached by an
    internal link has the site's own host as referrer and continues the
    session. The simulator's sessions follow this rule exactly: the landing
    page carries an external or empty referrer, later pages the previous URL.

    No inactivity timeout: a visitor who comes back later through an internal
    link continues the earlier session, and a reload of a landing page keeps
    its external referrer and counts again. Hosts compare exactly, so another
    subdomain of the same site counts as outside.
    """
    from pyspark.sql import functions as F

    url = F.coalesce(F.col("properties.url"), F.col("context.page.url"))
    referrer = F.coalesce(F.col("properties.referrer"), F.col("context.page.referrer"))
    referrer_host = url_host(referrer)
    return (F.col("type") == "page") & (
        referrer_host.isNull() | ~referrer_host.eqNullSafe(url_host(url))
    )


def build_site_activity(events: DataFrame) -> DataFrame:
    """Events, page views, sessions started and visitors of the whole site per minute.

    Input: parsed, deduplicated events (contract schema plus ``event_time``),
    all of them valid. ``events`` counts every call (page, track, identify
    ...); ``visitors`` is an HLL sketch of the identities of all of them;
    ``sessions_started`` counts the page views :func:`session_start` marks.
    The key ``site`` is always ``"all"``.

    Pure: works unchanged on a batch and on a (watermarked) streaming DataFrame.
    """
    from pyspark.sql import functions as F

    return (
        events.groupBy(minute_window())
        .agg(
            F.count(F.lit(1)).alias("events"),
            F.count_if(F.col("type") == "page").alias("page_views"),
            F.count_if(session_start()).alias("sessions_started"),
            visitors_sketch().alias("visitors"),
        )
        .select(window_start(), F.lit(SITE).alias("site"), *SPEC.columns[2:])
    )


SPEC = ViewSpec(
    name="site_activity",
    keys=("site",),
    measures=(
        Measure("events", "count", "Valid events of every type."),
        Measure("page_views", "count", "Page views."),
        Measure("sessions_started", "count", "Page views from outside the site."),
        Measure("visitors", "hll", "Distinct visitors (userId, else anonymousId), any event."),
    ),
    build=build_site_activity,
    description="The whole site per minute: events, page views, sessions, unique visitors.",
    constant_key=(SITE,),
)
