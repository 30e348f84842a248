"""Column expressions every view shares: identity, query normalisation, hosts, the window.

They follow the ground-truth rules of :mod:`ingest.simulator.truth`, so a view
built from them reproduces what a correct pipeline must report. All of them
are plain Spark expressions: they work on batch and streaming DataFrames alike.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "EVENT_TIME",
    "HLL_LG_K",
    "WINDOW",
    "identity",
    "interval_seconds",
    "minute_window",
    "normalise_query",
    "url_host",
    "visitors_sketch",
    "window_start",
]

EVENT_TIME = "event_time"
"""The event-time column of the views' input (the contract's skew-corrected ``timestamp``)."""

WINDOW = "1 minute"
"""Width of the tumbling event-time windows every view is computed in."""

HLL_LG_K = 12
"""log2 of the HLL sketches' register count: relative standard error ~1.6% (1.04 / 2**6)."""

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}

# Python's str.split() whitespace: Java's Unicode \s plus the ASCII separators \x1c-\x1f.
_WHITESPACE = r"(?U)[\s\x1c-\x1f]+"


def interval_seconds(text: str) -> int:
    """``"10 minutes"`` -> 600: a window or watermark as Spark writes it, in seconds.

    >>> interval_seconds("1 minute"), interval_seconds("10 minutes")
    (60, 600)
    """
    match = re.fullmatch(r"\s*(\d+)\s+(second|minute|hour|day)s?\s*", text)
    if match is None:
        raise ValueError(f"cannot read the window {text!r}; expected e.g. '1 minute'")
    return int(match[1]) * _UNITS[match[2]]


def identity() -> Column:
    """The visitor: ``userId`` when present and non-empty, else ``anonymousId``."""
    from pyspark.sql import functions as F

    user = F.col("userId")
    return F.when(F.length(user) > 0, user).otherwise(F.col("anonymousId"))


def normalise_query(query: Column) -> Column:
    """Lower-case, trim, collapse inner whitespace: ``"  Kafka   API "`` -> ``"kafka api"``."""
    from pyspark.sql import functions as F

    return F.lower(F.trim(F.regexp_replace(query, _WHITESPACE, " ")))


def url_host(url: Column) -> Column:
    """Lower-cased host of a URL; null for an empty, relative or unparsable one."""
    from pyspark.sql import functions as F

    return F.lower(F.try_parse_url(url, F.lit("HOST")))


def minute_window() -> Column:
    """The grouping column: the event's 1-minute tumbling window, named ``window``.

    Grouping by the window struct itself (not by its start) keeps the
    watermark attached, so the streaming state of closed windows is dropped.
    """
    from pyspark.sql import functions as F

    return F.window(EVENT_TIME, WINDOW).alias("window")


def window_start() -> Column:
    """The output column ``window_start`` taken from the grouped ``window``."""
    from pyspark.sql import functions as F

    return F.col("window.start").alias("window_start")


def visitors_sketch() -> Column:
    """HLL sketch (Apache DataSketches bytes) of the distinct identities."""
    from pyspark.sql import functions as F

    return F.hll_sketch_agg(identity(), HLL_LG_K)
