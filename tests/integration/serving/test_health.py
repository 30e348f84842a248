"""/health and every answer tell the truth about the speed layer's event time.

Progress rows are written into ``speed_progress`` as the speed layer writes them:
``page_activity``'s watermark was poisoned into year 9999, ``site_activity`` is
five seconds behind, ``clicks`` reports an event time just ahead of now (a clock
difference within the tolerance), the other web views report nothing yet. The
checkouts pipeline is healthy: orders published before its boundary, speed rows and
progress after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from pipelines import pipeline
from tests.integration.service_process import started_service
from tests.support.isolation import seen
from tests.support.ports import free_port

pytestmark = pytest.mark.integration

POISONED = datetime(9999, 12, 31, 23, 49, 59, tzinfo=UTC)
ERROR = "watermark 9999-12-31T23:49:59Z is ahead of now; reset the speed layer (docs/operations.md)"
SERVING = {"result_cache_entries": 0}
"""No answer kept: one asked after the poisoning is computed again, not the one from before."""


@pytest.fixture(scope="module")
def write_progress(cql, serving_settings) -> Callable[..., None]:
    """``write_progress(view, newest_event, watermark, kafka_lag)``, heartbeat now."""
    insert = cql.prepare(
        f"INSERT INTO {serving_settings.cassandra.keyspace}.speed_progress "
        "(view_name, max_event_time, watermark, heartbeat_at, kafka_lag) VALUES (?, ?, ?, ?, ?)"
    )

    def write(view: str, newest: datetime, watermark: datetime, lag: int) -> None:
        cql.execute(insert, (view, newest, watermark, datetime.now(UTC), lag))

    return write


@pytest.fixture(scope="module")
def web_progress(write_progress) -> Callable[[bool], None]:
    """``web_progress(poisoned)``: the web views' progress rows, ``page_activity``'s
    watermark in year 9999 when ``poisoned``, else now."""

    def write(poisoned: bool) -> None:
        now = datetime.now(UTC)
        page = (POISONED + timedelta(minutes=10), POISONED) if poisoned else (now, now)
        write_progress("page_activity", *page, 0)
        write_progress("site_activity", now - timedelta(seconds=5), now, 2)
        write_progress("clicks", now + timedelta(seconds=20), now, 0)

    return write


@pytest.fixture(scope="module")
def checkouts(publish, write_speed, write_progress) -> tuple[tuple, dict[str, int]]:
    """The checkouts pipeline, healthy: orders published before a boundary five minutes
    ago, speed rows and progress from it. Returns the span of its windows and its orders
    per currency there (the ground truth)."""
    boundary = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=5)

    def row(minutes: int, currency: str, orders: int) -> dict:
        return {
            "window_start": boundary + timedelta(minutes=minutes),
            "currency": currency,
            "orders": orders,
            "refunds": 0,
            "revenue_minor": 999.0 * orders,
            "buyers": None,
            "order_value": None,
        }

    batch, speed = [row(-3, "EUR", 3), row(-2, "USD", 2)], [row(0, "EUR", 4), row(1, "GBP", 1)]
    publish("orders_by_currency", batch, boundary)
    write_speed("orders_by_currency", speed)
    write_progress("orders_by_currency", boundary + timedelta(minutes=1), boundary, 0)
    orders: Counter[str] = Counter()
    for r in batch + speed:
        orders[r["currency"]] += r["orders"]
    return (boundary - timedelta(minutes=10), boundary + timedelta(minutes=10)), dict(orders)


@pytest.fixture(scope="module", autouse=True)
def progress(web_progress, checkouts) -> None:
    web_progress(poisoned=True)


def test_health_names_the_pipeline_and_view_whose_watermark_is_ahead_of_now(
    serving_url, api, cql, serving_settings, web_progress, checkouts
) -> None:
    """One pipeline's error is that pipeline's: the answer is 200 ``degraded`` (a load
    balancer keeps every serving task for the pipelines that serve), naming it. It was 503
    for every pipeline (finding 3 of the pipelines' isolation). What the other pipeline's
    users see (its answers, boundary and health verdict) is what it was before."""
    span, orders = checkouts
    shop = pipeline("checkouts")
    web_progress(poisoned=False)
    before = seen(cql, serving_settings, shop, api=api, span=span)
    assert before.health == {"status": "ok", "views": ["orders_by_currency"]}
    items = before.answers["orders_by_currency"]["orders"]["items"]
    assert {i["key"]["currency"]: i["value"] for i in items} == orders

    web_progress(poisoned=True)
    answer = httpx.get(f"{serving_url}/health")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "degraded" and body["error"] == "speed_event_time"
    assert body["message"] == f"page_activity: {ERROR}"
    web = body["pipelines"]["web_events"]
    assert web["status"] == "error" and web["message"] == f"page_activity: {ERROR}"
    poisoned = body["freshness"]["page_activity"]
    assert poisoned["status"] == "error" and poisoned["error"] == ERROR
    assert poisoned["lag_s"] is None
    assert poisoned["watermark"] == "9999-12-31T23:49:59Z"
    assert 4 <= body["freshness"]["site_activity"]["lag_s"] < 120
    assert body["freshness"]["clicks"]["lag_s"] == 0
    assert body["freshness"]["search_terms"]["status"] == "unknown"
    for fresh in body["freshness"].values():
        assert fresh["lag_s"] is None or fresh["lag_s"] >= 0
    after = seen(cql, serving_settings, shop, api=api, span=span)
    assert before.changes(after) == {}, "checkouts, once web events' watermark was poisoned"


def test_every_answer_reports_the_error_for_its_view(api) -> None:
    params = {"view": "page_activity", "key": "/", "start": "now-5m"}
    series = api.get("/v1/timeseries", params=params)
    assert series.status_code == 200, series.text
    fresh = series.json()["freshness"]["page_activity"]
    assert fresh["status"] == "error" and fresh["error"] == ERROR and fresh["lag_s"] is None
    top = api.get("/v1/top", params={"view": "page_activity", "measure": "page_views"}).json()
    assert top["freshness"]["page_activity"]["status"] == "error"
    reach = api.get("/v1/reach", params={"view": "site_activity", "start": "now-5m"}).json()
    assert reach["freshness"]["site_activity"]["status"] == "ok"


def test_the_platform_probe_shows_the_error(serving_settings, serving_url) -> None:
    from platformctl.platform import serving_healthy

    healthy, detail = serving_healthy(serving_settings)
    assert healthy, detail  # serving answers: the other pipeline serves
    assert f"; DEGRADED page_activity: {ERROR}; " in detail, detail


def test_two_serving_workers_say_healthy_only_once_both_listen(serving_settings, tmp_path):
    """``python -m serving serve`` with two workers on one port: a worker takes connections
    only once its app has started, so until both listen the one that does would be given
    every connection a client opens then. /health holds back (503 ``starting``) until both
    listen; its first other answer (here the poisoned view's 503) says so."""
    settings = serving_settings.model_copy(
        update={"serving": serving_settings.serving.model_copy(
            update={"port": free_port(), "workers": 2}
        )}
    )  # fmt: skip

    def past_starting(answer: httpx.Response) -> bool:
        return answer.json().get("error") != "starting"

    with started_service(
        ["serving", "serve"], settings, settings.serving.port, tmp_path / "serving.log",
        until=past_starting,
    ) as (_, _, answer):  # fmt: skip
        body = answer.json()
        assert body["workers"] == {"listening": 2, "of": 2}
        assert answer.status_code == 200 and body["error"] == "speed_event_time"
