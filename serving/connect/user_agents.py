"""The user-agent dimension of silver's events: browser, OS, device type and a bot flag.

Silver keeps each event's ``context.userAgent`` but SQL views do not show it
(the contract restricts it). What analysts ask for is its families, so the SQL
server keeps a small Delta table, ``<lake>/dims/user_agents``, one row per
distinct user agent, and the ``events`` view joins it. The families come from
maintained libraries, not from rules of our own: ua-parser (uap-core's
regexes, the ones most analytics tools use) for browser, OS and device, and
crawlerdetect (the list behind JayBizzle/Crawler-Detect) for bots.

>>> d = describe("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)")
>>> d.browser, d.device_type, d.is_bot
('Googlebot', 'bot', True)
>>> describe("Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
...          "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1")[1:]
('Mobile Safari', 'iOS', 'mobile', False)
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["DIM_COLUMNS", "UserAgent", "describe", "refresh_user_agents"]

_TABLETS = ("iPad", "Kindle", "Tablet")
"""Words of ua-parser's device family or brand that name a tablet (``Generic_Android_Tablet``)."""
_MOBILE_OS = ("iOS", "Android", "Windows Phone", "BlackBerry OS", "KaiOS", "Symbian OS")
_MOBILE_WORDS = ("iPhone", "iPod", "Generic_Smartphone", "Generic_Android", "Generic_Feature_Phone")


class UserAgent(NamedTuple):
    """One row of the dimension."""

    user_agent: str
    browser: str | None
    """ua-parser's user-agent family: ``Chrome``, ``Mobile Safari``, ``Googlebot``..."""
    os: str | None
    """ua-parser's OS family: ``Windows``, ``iOS``, ``Android``..."""
    device_type: str
    """``desktop``, ``mobile``, ``tablet``, ``bot`` or ``unknown`` (no user agent)."""
    is_bot: bool
    """A known crawler, spider or HTTP library (crawlerdetect, or ua-parser's ``Spider``)."""


DIM_COLUMNS = "user_agent string, browser string, os string, device_type string, is_bot boolean"
"""The dimension table's schema (Spark DDL)."""


@lru_cache(maxsize=65_536)
def describe(user_agent: str) -> UserAgent:
    """The families of one user agent."""
    from crawlerdetect import CrawlerDetect
    from ua_parser import parse

    if not user_agent.strip():
        return UserAgent(user_agent, None, None, "unknown", False)
    parsed = parse(user_agent)
    browser = parsed.user_agent.family if parsed.user_agent else None
    os = parsed.os.family if parsed.os else None
    device = parsed.device
    words = (device.family or "", device.brand or "") if device else ("", "")
    is_bot = "Spider" in words or CrawlerDetect(user_agent=user_agent).isCrawler()
    if is_bot:
        kind = "bot"
    elif any(t in word for t in _TABLETS for word in words):
        kind = "tablet"
    elif os in _MOBILE_OS or any(m in word for m in _MOBILE_WORDS for word in words):
        kind = "mobile"
    else:
        kind = "desktop"
    return UserAgent(user_agent, browser, os, kind, is_bot)


def refresh_user_agents(spark: SparkSession, silver: str, table: str) -> int:
    """Add to the dimension at ``table`` the user agents of silver (at ``silver``) it lacks.

    Returns how many were added. Run by the SQL server's own (trusted) session.
    """
    from delta.tables import DeltaTable

    agents = spark.read.format("delta").load(silver).selectExpr("context.userAgent AS user_agent")
    agents = agents.where("user_agent IS NOT NULL").distinct()
    if DeltaTable.isDeltaTable(spark, table):
        known = spark.read.format("delta").load(table).select("user_agent")
        agents = agents.join(known, "user_agent", "left_anti")
    new = [describe(row.user_agent) for row in agents.collect()]
    if new:
        import pandas as pd

        # From pandas through Arrow: the rows reach the JVM without a Python worker.
        frame = pd.DataFrame(new, columns=list(UserAgent._fields))
        rows = spark.createDataFrame(frame, DIM_COLUMNS)
        rows.write.format("delta").mode("append").save(table)
    elif not DeltaTable.isDeltaTable(spark, table):
        # No user agent yet (Segment's server libraries send none): the empty table, made
        # in the JVM. An empty pandas frame does not go through Arrow, and the server
        # starts no Python worker: every refresh failed until a user agent arrived.
        empty = spark.sql("SELECT * FROM VALUES (1) WHERE false").selectExpr(*_nulls())
        empty.write.format("delta").mode("append").save(table)
    return len(new)


def _nulls() -> list[str]:
    """``CAST(NULL AS <type>) AS <name>`` for each column of the dimension."""
    columns = (column.split(" ") for column in DIM_COLUMNS.split(", "))
    return [f"CAST(NULL AS {kind}) AS {name}" for name, kind in columns]
