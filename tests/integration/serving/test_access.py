"""Analysts of two teams on the real serving process: each reads only what is granted to its
team, a revoked token stops working within seconds, and every read is on the audit topic.

Tokens are issued into this module's keyspace as ``platformctl access issue`` issues them
(:class:`access.store.TokenStore`); serving re-reads them every ``access.refresh_s``.
"""

from __future__ import annotations

import time
import uuid

import httpx
import orjson
import pytest

from core.settings import Settings

pytestmark = [pytest.mark.integration]

ORDERS = "/v1/timeseries?view=orders_by_currency&key=EUR&start=now-1h&end=now"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _until(condition, timeout_s: float, what: str) -> float:
    """Seconds until ``condition()`` held; fails after ``timeout_s``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if condition():
            return time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def test_two_teams_read_their_own_views_and_a_revoked_token_stops_within_seconds(
    serving_settings: Settings, cql, serving_url: str
) -> None:
    from access.audit import read_records
    from access.store import TokenStore
    from ingest.topics import audit_topic, ensure_topics

    admin_topics = serving_settings.kafka.client_config()
    from confluent_kafka.admin import AdminClient

    ensure_topics(AdminClient(admin_topics), [audit_topic(serving_settings.kafka, 1)])
    run = uuid.uuid4().hex[:8]
    ana, bo = f"ana-{run}", f"bo-{run}"
    store = TokenStore(cql, serving_settings.cassandra.keyspace)
    web, shop = store.issue(ana, ["web-analytics"]).text, store.issue(bo, ["shop-data"]).text

    with httpx.Client(base_url=serving_url, timeout=30) as client:
        issued_in = _until(
            lambda: client.get("/v1/views", headers=_bearer(shop)).status_code == 200,
            5,
            "a new token working",
        )
        seen = {
            who: {v["pipeline"] for v in client.get("/v1/views", headers=_bearer(t)).json()}
            for who, t in (("web", web), ("shop", shop))
        }
        assert seen == {"web": {"web_events"}, "shop": {"checkouts"}}
        assert client.get(ORDERS, headers=_bearer(shop)).status_code == 200
        other = client.get(ORDERS, headers=_bearer(web))
        missing = client.get(ORDERS.replace("orders_by_currency", "payroll"), headers=_bearer(web))
        assert (other.status_code, missing.status_code) == (403, 403)
        said = other.json()["message"]
        assert said.startswith(f"View 'orders_by_currency' is not granted to {ana}; ")
        assert "page_activity" in said and "orders_by_currency," not in said
        assert missing.json()["message"] == said.replace("'orders_by_currency'", "'payroll'")
        reach = client.get("/v1/reach", headers=_bearer(web))
        assert reach.status_code == 200, reach.text

        assert store.revoke(bo) != []
        revoked_in = _until(
            lambda: client.get(ORDERS, headers=_bearer(shop)).status_code == 401,
            5,
            "the revoked token refused",
        )
        assert client.get("/v1/views", headers=_bearer(web)).status_code == 200
    print(f"a new token worked after {issued_in:.2f} s, a revoked one stopped after", revoked_in)

    records = read_records(serving_settings, {ana, bo})  # until the topic is quiet
    got = [(r["identity"], r["action"], tuple(r["views"]), r["outcome"]) for r in records]
    assert (ana, "/v1/timeseries", ("orders_by_currency",), "refused") in got
    assert (ana, "/v1/timeseries", ("payroll",), "refused") in got
    assert (bo, "/v1/timeseries", ("orders_by_currency",), "ok") in got
    assert (ana, "/v1/reach", ("site_activity",), "ok") in got
    assert all(r["teams"] in (["web-analytics"], ["shop-data"]) for r in records)
    assert not any("EUR" in orjson.dumps(r).decode() for r in records), "parameters never logged"
