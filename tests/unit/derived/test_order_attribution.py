"""``order_attribution`` over the simulators' shared users equals its ground truth.

The website's traffic holds checkouts (``Order Completed`` calls of logged-in users);
the checkout service records those orders under the same ids, bought by the same users,
beside orders of its own buyers who never visit. The sessions are ``web_sessions``'
rows as built from the web events' silver; the orders the checkouts' silver.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from derived import order_attribution, web_sessions
from derived.inputs import project
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.session_truth import build_session_truth
from pipelines.simulators.checkouts import CheckoutConfig, orders_of_visits
from pipelines.simulators.checkouts import generate as generate_orders
from pipelines.simulators.order_attribution import build_attribution_truth
from tests.support.silver import checkout_silver_rows, web_silver_rows

pytestmark = pytest.mark.slow

START = datetime(2024, 3, 1, 20, 0, tzinfo=UTC)


def _attribution(spark, web, orders):
    silver = web_silver_rows(spark, [(e.payload, e.sent_at) for e in web])
    sessions = web_sessions.build({"web_events": project(silver, web_sessions.READS["web_events"])})
    inputs = {
        "web_sessions": project(sessions, order_attribution.READS["web_sessions"]),
        "checkouts": project(
            checkout_silver_rows(spark, orders), order_attribution.READS["checkouts"]
        ),
    }
    rows = [r.asDict() for r in order_attribution.build(inputs).collect()]
    return sorted(rows, key=lambda r: tuple(str(v) for v in r.values()))


def test_orders_go_to_the_last_campaign_of_their_buyer_within_seven_days(spark):
    config = SimulatorConfig(
        seed=21, events=3000, rate=0.2, users=60, known_user_rate=0.6, checkout_rate=0.04,
        start=START, duplicate_rate=0.02, late_rate=0.02, invalid_rate=0.01,
    )  # fmt: skip
    web = generate(config)
    shop = CheckoutConfig(seed=3, events=150, start=START, rate=0.01, buyers=40)
    orders = orders_of_visits(web) + generate_orders(shop)
    found = _attribution(spark, web, orders)
    truth = build_attribution_truth(build_session_truth(web), orders)
    attributed = [r for r in truth if r["campaign_name"] != "(none)" and r["orders"]]
    assert attributed, "some orders follow a campaign's visit"
    assert any(r["campaign_name"] == "(none)" for r in truth), "and some follow none"
    assert any(r["currency"] is None for r in truth), "a campaign visited without an order"
    assert found == truth


def _session(sid, user, at, campaign):
    return {
        "session_id": sid, "session_date": at.date(), "user_id": user, "started_at": at,
        "campaign_name": campaign, "campaign_source": campaign and "src",
        "campaign_medium": campaign and "cpc",
    }  # fmt: skip


def _order(event_id, buyer, at, amount=1000, kind="order_completed"):
    return {
        "event_id": event_id, "type": kind, "buyer_id": buyer, "amount_minor": amount,
        "currency": "EUR", "event_time": at,
    }  # fmt: skip


def test_the_window_is_seven_days_back_to_the_order_and_a_later_visit_does_not_count(spark):
    t = datetime(2024, 3, 10, 12, 0, tzinfo=UTC)
    sessions = [
        _session("s-old", "u-1", t - timedelta(days=7, seconds=1), "too_old"),
        _session("s-edge", "u-1", t - timedelta(days=7), "edge"),
        _session("s-after", "u-1", t + timedelta(seconds=1), "after"),
        _session("s-plain", "u-2", t - timedelta(hours=1), None),
    ]
    orders = [
        _order("o1", "u-1", t),
        _order("o2", "u-2", t, 500),
        _order("r1", "u-1", t, 300, kind="order_refunded"),
    ]
    schema_s = "session_id string, session_date date, user_id string, started_at timestamp, " \
        "campaign_name string, campaign_source string, campaign_medium string"  # fmt: skip
    schema_o = "event_id string, type string, buyer_id string, amount_minor long, " \
        "currency string, event_time timestamp"  # fmt: skip
    inputs = {
        "web_sessions": spark.createDataFrame(sessions, schema_s),
        "checkouts": spark.createDataFrame(orders, schema_o),
    }
    rows = order_attribution.build(inputs).where("attribution_date = '2024-03-10'").collect()
    sold = {r.campaign_name: (r.orders, r.revenue_minor) for r in rows if r.orders}
    assert sold == {"edge": (1, 1000), "(none)": (1, 500)}  # the refund is not attributed
    visited = {r.campaign_name: (r.sessions, r.conversion_rate) for r in rows}
    assert visited["after"] == (1, 0.0) and visited["edge"] == (None, None)
