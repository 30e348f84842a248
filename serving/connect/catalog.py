"""The SQL server's catalog as SQL text: one persistent view per name analysts query.

The views live in the server's catalog (Spark's in-memory catalog: nothing to
run beside it, rebuilt at every start), so every Spark Connect session sees
them by name without running any code of this repository. Their bodies are
the server's; the read-only guard lets an analyst read a view but no path or
table behind it. Names:

- ``gold_<view>``: the view's gold Delta table (the exact batch rows).
- ``speed_<view>``: the speed rows from Cassandra, a snapshot the server
  takes every ``sql.refresh_s`` (a Parquet folder per snapshot).
- ``serving_<view>``: gold before the view's batch boundary and speed at or
  after it, with ``final`` (true for batch rows): what the API merges.
- ``serving_boundaries``: ``view_name``, ``boundary``, ``refreshed_at``.
- ``events_all``: silver's events with the contract's columns (the fields it
  hides from SQL left out) and the dimensions analysts ask for; ``events``:
  the same without bots (the collector's default pipeline); ``<pipeline>_events``
  for any other pipeline.
- ``<derived>``: a derived pipeline's table, as its contract lets SQL show it
  (:mod:`serving.connect.derived_views`).
- ``audit_log``: the audit table (:mod:`serving.connect.audit_table`), the admins' only.

Which identity sees which of them is :mod:`serving.connect.grants`'s.

>>> from views import view
>>> print(serving_sql(view("clicks"), 1_700_000_000_000))
CREATE OR REPLACE VIEW serving_clicks AS
SELECT window_start, target, clicks, true AS final FROM gold_clicks
WHERE window_start < timestamp_millis(1700000000000)
UNION ALL
SELECT window_start, target, clicks, false AS final FROM speed_clicks
WHERE window_start >= timestamp_millis(1700000000000)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pipelines import Collector, DerivedSpec
from views.spec import ViewSpec

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

    from pipelines import PipelineSpec

__all__ = [
    "DEFAULT_EVENTS",
    "DIMENSIONS",
    "NOT_IN_SQL",
    "boundaries_sql",
    "empty_view_sql",
    "events_sql",
    "events_views",
    "path_view_sql",
    "pipeline_views",
    "quote",
    "serving_sql",
    "table_view_sql",
]

NOT_IN_SQL = ("partition", "offset", "payload")
"""Silver columns no SQL view shows: Kafka coordinates, and the whole event as received
(``payload`` holds the fields the contract hides, too)."""

DIMENSIONS = {
    "referrer_host": "try_parse_url(s.context.page.referrer, 'HOST')",
    "utm_source": "s.context.campaign.source",
    "utm_medium": "s.context.campaign.medium",
    "utm_campaign": "s.context.campaign.name",
    "browser": "ua.browser",
    "os": "ua.os",
    "device_type": "coalesce(ua.device_type, 'unknown')",
    "is_bot": "coalesce(ua.is_bot, false)",
}
"""The columns ``events`` adds to silver's: name -> expression over silver (``s``) and the
user-agent dimension (``ua``, :mod:`serving.connect.user_agents`)."""


DEFAULT_EVENTS = ("events_all", "events")
"""The events views of the collector's default pipeline."""


def events_views(pipeline: PipelineSpec) -> tuple[str, ...]:
    """The events views the catalog makes of ``pipeline``'s silver.

    >>> from pipelines import pipeline
    >>> events_views(pipeline("web_events")), events_views(pipeline("checkouts"))
    (('events_all', 'events'), ('checkouts_events',))
    """
    if isinstance(pipeline.arrival, Collector) and pipeline.arrival.default:
        return DEFAULT_EVENTS
    return (f"{pipeline.name}_events",)


def pipeline_views(pipeline: PipelineSpec | DerivedSpec) -> tuple[str, ...]:
    """Every view of the catalog that reads ``pipeline``'s data (a derived pipeline's: its
    table's, named after it).

    >>> from pipelines import derived_pipeline, pipeline
    >>> pipeline_views(pipeline("checkouts"))
    ('gold_orders_by_currency', 'speed_orders_by_currency', 'serving_orders_by_currency', \
'checkouts_events')
    >>> pipeline_views(derived_pipeline("web_sessions"))
    ('web_sessions',)
    """
    if isinstance(pipeline, DerivedSpec):
        return (pipeline.name,)
    made = [f"{kind}_{view}" for view in pipeline.views for kind in ("gold", "speed", "serving")]
    return (*made, *events_views(pipeline))


def quote(name: str) -> str:
    """A Spark SQL identifier in backticks.

    >>> quote("odd`name")
    '`odd``name`'
    """
    return "`" + name.replace("`", "``") + "`"


def _path(path: str) -> str:
    return quote(path)


def path_view_sql(name: str, fmt: str, path: str, columns: tuple[str, ...]) -> str:
    """``name`` as the given columns of the table at ``path`` (``delta`` or ``parquet``)."""
    select = ", ".join(quote(c) for c in columns)
    return f"CREATE OR REPLACE VIEW {quote(name)} AS SELECT {select} FROM {fmt}.{_path(path)}"


def empty_view_sql(name: str, schema: StructType) -> str:
    """``name`` with ``schema``'s columns and no rows (a table not written yet)."""
    nulls = [f"CAST(NULL AS {f.dataType.simpleString()}) AS {quote(f.name)}" for f in schema]
    select = ", ".join(nulls)
    return f"CREATE OR REPLACE VIEW {quote(name)} AS SELECT {select} WHERE false"


def serving_sql(spec: ViewSpec, boundary_ms: int | None) -> str:
    """``serving_<view>``: gold before the boundary, speed from it (speed only without one)."""
    columns = ", ".join(spec.columns)
    speed = f"SELECT {columns}, false AS final FROM speed_{spec.name}"
    head = f"CREATE OR REPLACE VIEW serving_{spec.name} AS\n"
    if boundary_ms is None:
        return head + speed
    cut = f"timestamp_millis({int(boundary_ms)})"
    return (
        f"{head}SELECT {columns}, true AS final FROM gold_{spec.name}\n"
        f"WHERE window_start < {cut}\nUNION ALL\n{speed}\nWHERE window_start >= {cut}"
    )


def boundaries_sql(boundaries: Mapping[str, int | None], refreshed_ms: int) -> str:
    """``serving_boundaries``: each view's batch boundary and when the server read it.

    >>> print(boundaries_sql({"clicks": None, "page_activity": 60_000}, 120_000))
    CREATE OR REPLACE VIEW serving_boundaries AS SELECT * FROM VALUES
    ('clicks', CAST(NULL AS TIMESTAMP), timestamp_millis(120000)),
    ('page_activity', timestamp_millis(60000), timestamp_millis(120000))
    AS t(view_name, boundary, refreshed_at)
    """
    refreshed = f"timestamp_millis({int(refreshed_ms)})"
    rows = []
    for name, ms in boundaries.items():
        at = "CAST(NULL AS TIMESTAMP)" if ms is None else f"timestamp_millis({int(ms)})"
        rows.append(f"('{name}', {at}, {refreshed})")
    return (
        "CREATE OR REPLACE VIEW serving_boundaries AS SELECT * FROM VALUES\n"
        + ",\n".join(rows)
        + "\nAS t(view_name, boundary, refreshed_at)"
    )


def _projection(reference: str, exposed: DataType, stored: DataType) -> str:
    """``reference`` as ``exposed`` shows it: whole when the types agree, else a struct of
    the exposed fields (the hidden ones left out)."""
    from pyspark.sql.types import StructType

    if exposed == stored or not isinstance(exposed, StructType):
        return reference
    assert isinstance(stored, StructType)
    fields = []
    for field in exposed:
        inner = _projection(
            f"{reference}.{quote(field.name)}", field.dataType, stored[field.name].dataType
        )
        fields.append(f"'{field.name}', {inner}")
    return f"named_struct({', '.join(fields)})"


def _column(name: str, exposed: DataType, stored: DataType) -> str:
    return f"{_projection('s.' + quote(name), exposed, stored)} AS {quote(name)}"


def table_view_sql(name: str, stored: StructType, exposed: StructType, path: str) -> str:
    """``name``: the Delta table at ``path`` with the columns SQL may show (``exposed``).

    >>> from pyspark.sql.types import StringType, StructField, StructType
    >>> stored = StructType([StructField("day", StringType()), StructField("who", StringType())])
    >>> print(table_view_sql("visits", stored, StructType(stored.fields[:1]), "/lake/visits"))
    CREATE OR REPLACE VIEW `visits` AS
    SELECT s.`day` AS `day`
    FROM delta.`/lake/visits` s
    """
    body = ",\n       ".join(_column(f.name, f.dataType, stored[f.name].dataType) for f in exposed)
    return f"CREATE OR REPLACE VIEW {quote(name)} AS\nSELECT {body}\nFROM delta.{_path(path)} s"


def pipeline_events_sql(name: str, stored: StructType, exposed: StructType, silver: str) -> str:
    """``<name>_events``: the silver rows of a pipeline whose service produces its events,
    with the columns its contract lets SQL show (``exposed``) and none of :data:`NOT_IN_SQL`.

    >>> from pyspark.sql.types import LongType, StringType, StructField, StructType
    >>> stored = StructType([StructField("order_id", StringType()), StructField("offset",
    ...     LongType())])
    >>> print(pipeline_events_sql("checkouts", stored, stored, "/lake/silver/shop"))
    CREATE OR REPLACE VIEW checkouts_events AS
    SELECT s.`order_id` AS `order_id`
    FROM delta.`/lake/silver/shop` s
    """
    shown = [f for f in exposed if f.name not in NOT_IN_SQL]
    body = ",\n       ".join(_column(f.name, f.dataType, stored[f.name].dataType) for f in shown)
    return f"CREATE OR REPLACE VIEW {name}_events AS\nSELECT {body}\nFROM delta.{_path(silver)} s"


def events_sql(
    stored: StructType, exposed: StructType, silver: str, user_agents: str
) -> tuple[str, str]:
    """(``events_all``, ``events``): silver's ``exposed`` columns and the dimensions.

    ``stored`` is silver's schema, ``exposed`` what
    :func:`data_contracts.derive.privacy.sql_view` leaves of it; columns of
    :data:`NOT_IN_SQL` are left out too.
    """
    shown = [f for f in exposed if f.name not in NOT_IN_SQL]
    select = [_column(f.name, f.dataType, stored[f.name].dataType) for f in shown]
    select += [f"{expression} AS {name}" for name, expression in DIMENSIONS.items()]
    body = ",\n       ".join(select)
    events_all = (
        f"CREATE OR REPLACE VIEW events_all AS\nSELECT {body}\n"
        f"FROM delta.{_path(silver)} s\n"
        f"LEFT JOIN delta.{_path(user_agents)} ua ON ua.user_agent = s.context.userAgent"
    )
    events = "CREATE OR REPLACE VIEW events AS SELECT * FROM events_all WHERE NOT is_bot"
    return events_all, events
