"""A raised ``speed.ttl_s`` reaches the speed tables that exist already, so serving, which
counts on it, never answers from a row that has expired."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from core.settings import Settings

pytestmark = pytest.mark.integration

HOUR_S, DAY_S = 3600, 24 * 3600


def _with_ttl(settings: Settings, ttl_s: int) -> Settings:
    return settings.model_copy(update={"speed": settings.speed.model_copy(update={"ttl_s": ttl_s})})


def _ttls(session, keyspace: str) -> dict[str, int]:
    rows = session.execute(
        "SELECT table_name, default_time_to_live FROM system_schema.tables "
        "WHERE keyspace_name = %s",
        (keyspace,),
    )
    return {row.table_name: row.default_time_to_live for row in rows}


@pytest.fixture
def keyspace_settings(local_platform: Settings, cassandra_keyspace: str) -> Settings:
    return local_platform.model_copy(
        update={
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            )
        }
    )


def _clicks_bucket(settings: Settings, session, window: datetime, at_s: float) -> dict:
    """Serving's answer for one minute of ``clicks`` of target ``buy``, asked at ``at_s``."""
    from serving.freshness import FreshnessRules
    from serving.query import Queries
    from serving.store import ServingStore

    async def ask() -> dict:
        store = ServingStore(session, settings.cassandra.keyspace, pointer_cache_s=0)
        queries = Queries(store, clock=lambda: at_s, rules=FreshnessRules.from_settings(settings))
        lo = int(window.timestamp() * 1000)
        return await queries.timeseries("clicks", [("buy",)], lo, lo + 60_000)

    (series,) = asyncio.run(ask())["series"]
    (bucket,) = series["buckets"]
    return bucket


def test_a_raised_ttl_reaches_existing_speed_tables_and_serving_follows_it(
    keyspace_settings: Settings, cassandra_session
):
    from layout import ViewTables, create_tables, create_view_tables
    from speed_layer.sink import write_rows
    from tests.support.web import WEB_VIEWS
    from views import view

    keyspace = keyspace_settings.cassandra.keyspace
    create_tables(_with_ttl(keyspace_settings, HOUR_S))  # tables of a release with a 1 h TTL
    replay = ViewTables(view("clicks"), keyspace, "speed", table_version=1)
    create_view_tables(cassandra_session, replay, HOUR_S)
    speed = {f"speed_{v.name}{end}" for v in WEB_VIEWS for end in ("", "_by_minute")}
    assert {t: ttl for t, ttl in _ttls(cassandra_session, keyspace).items() if t in speed} == (
        dict.fromkeys(speed, HOUR_S)
    )

    settings = _with_ttl(keyspace_settings, 3 * DAY_S)
    create_tables(settings)  # the job's start (and platformctl up) with the raised TTL
    create_view_tables(cassandra_session, replay, settings.speed.ttl_s)  # a replay's version
    ttls = _ttls(cassandra_session, keyspace)
    versioned = {"speed_v1_clicks", "speed_v1_clicks_by_minute"}
    assert {t: ttls[t] for t in speed | versioned} == dict.fromkeys(speed | versioned, 3 * DAY_S)
    assert ttls["batch_clicks"] == 0  # batch rows never expire

    # The speed layer writes a window older than the old TTL, younger than the new one.
    now = datetime.now(UTC)
    window = now.replace(second=0, microsecond=0) - timedelta(minutes=90)
    tables = ViewTables(view("clicks"), keyspace, "speed")
    row = {"window_start": window, "target": "buy", "clicks": 4}
    assert write_rows([row], tables, settings.cassandra, batch_id=1) == 1
    (left,) = cassandra_session.execute(
        f"SELECT TTL(clicks) AS ttl FROM {tables.by_minute} WHERE window_start = %s", (window,)
    )
    expires_s = now.timestamp() + left.ttl

    # Serving answers the window from the row now, and calls it unavailable by the time the
    # row expires: it never answers 0 for a window whose row has gone.
    bucket = _clicks_bucket(settings, cassandra_session, window, now.timestamp())
    assert (bucket["available"], bucket["clicks"]) == (True, 4)
    at_expiry = _clicks_bucket(settings, cassandra_session, window, expires_s)
    assert (at_expiry["available"], at_expiry["clicks"]) == (False, None)
