"""Pipelines over pipelines on the real stack: sessions and attributed orders, final and
forgettable.

The website's traffic (logged-in users check out) goes through the collector's intake to
this test's web topic; the checkout service records those orders, and orders of its own
buyers, on its topic. Both pipelines run their ingest steps in-process (Kafka -> bronze ->
silver -> the silver gate), then ``derive`` builds ``web_sessions`` and, over it and the
checkouts, ``order_attribution``: both equal their ground truth. Late web events come in
(a republished day of silver): ``web_sessions`` rebuilds that day alone and the
attribution the days it reaches, equal to the truth of everything sent. A buyer is then
forgotten in both input pipelines, as ``platformctl forget`` runs it: both derived tables
are rebuilt from inputs without them and equal the truth without them.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from batch_layer.runner import run_steps
from batch_layer.steps import DERIVED, FORGET, INGEST
from core.settings import KafkaSettings, Settings
from ingest.simulator import SimulatorConfig, generate, stamp_sent_at
from ingest.simulator.direct import produce_direct
from ingest.simulator.session_truth import build_session_truth
from layout.lake import derived_path
from pipelines import DERIVED as DERIVED_PIPELINES
from pipelines import derived_pipeline, pipeline
from pipelines.simulators.checkouts import CheckoutConfig, orders_of_visits, produce
from pipelines.simulators.checkouts import generate as generate_orders
from pipelines.simulators.order_attribution import build_attribution_truth
from platformctl.forget import reached_by

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WEB, SHOP = pipeline("web_events"), pipeline("checkouts")
SESSIONS, ATTRIBUTION = derived_pipeline("web_sessions"), derived_pipeline("order_attribution")
START = datetime(2024, 5, 6, 21, 0, tzinfo=UTC)


@pytest.fixture
def both(lake_settings: Settings, laid_out_keyspaces):
    """This test's web topic (``lake_settings``), a topic for the checkouts beside it, a
    lake and a keyspace with the layout's tables."""
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    shop = f"{lake_settings.kafka.events_topic}.shop"
    kafka = KafkaSettings(**lake_settings.kafka.model_dump() | {"topics": {SHOP.name: shop}})
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, [replace(platform_topics(kafka)[0], name=shop)])
    with laid_out_keyspaces.lend(lake_settings.model_copy(update={"kafka": kafka})) as lent:
        yield lent
    admin.delete_topics([shop])


def _ingest(spark, settings, run_id):
    for spec in (WEB, SHOP):
        summary, code = run_steps(spark, settings, INGEST, spec, f"{run_id}-{spec.name}")
        assert code == 0, summary


def _derive(spark, settings, run_id) -> dict[str, tuple]:
    done = {}
    for spec in DERIVED_PIPELINES:  # each after its inputs
        summary, code = run_steps(spark, settings, DERIVED, spec, f"{run_id}-{spec.name}")
        assert code == 0, summary
        done[spec.name] = tuple(summary["steps"]["derive"]["result"]["days"])
    return done


def _table(spark, settings, spec):
    rows = spark.read.format("delta").load(derived_path(settings, spec.name)).collect()
    plain = [
        {k: v.astimezone(UTC) if isinstance(v, datetime) else v for k, v in r.asDict().items()}
        for r in rows
    ]
    return sorted(plain, key=lambda r: tuple(str(v) for v in r.values()))


def _sessions(spark, settings):
    return sorted(_table(spark, settings, SESSIONS), key=lambda r: r["session_id"])


def test_sessions_and_attribution_equal_their_truth_through_late_events_and_a_forget(spark, both):
    settings = both
    config = SimulatorConfig(
        seed=31, events=1800, rate=0.15, users=50, known_user_rate=0.7, checkout_rate=0.05,
        start=START, duplicate_rate=0.02, invalid_rate=0.01,
    )  # fmt: skip
    web = generate(config)
    # The late part: events of the first evening's last hours, sent the next morning.
    late_shift = [e for e in web[len(web) * 2 // 3 :] if e.time.date() == START.date()]
    sent_late = {id(e) for e in late_shift}
    on_time = [e for e in web if id(e) not in sent_late]
    shop = CheckoutConfig(seed=5, events=120, start=START, rate=0.01, buyers=30)
    orders = orders_of_visits(web) + generate_orders(shop)
    produce(orders, settings.kafka.client_config(), SHOP.topic_of(settings))
    produce_direct(on_time, settings)
    _ingest(spark, settings, "r1")
    built = _derive(spark, settings, "r1")
    days = sorted({e.time.date() for e in on_time})
    assert len(days) == 2 and set(built[SESSIONS.name]) == set(days)
    assert _sessions(spark, settings) == build_session_truth(on_time)
    assert _table(spark, settings, ATTRIBUTION) == build_attribution_truth(
        build_session_truth(on_time), orders
    )

    # Late events of the first day, sent later: that day of silver is published again.
    assert late_shift, "some events of the first day come late"
    produce_direct([stamp_sent_at(e, e.sent_at + timedelta(hours=9)) for e in late_shift], settings)
    _ingest(spark, settings, "r2")
    rebuilt = _derive(spark, settings, "r2")
    assert rebuilt[SESSIONS.name] == (days[0],)
    reached = {days[0] + timedelta(days=k) for k in range(8)}
    assert set(rebuilt[ATTRIBUTION.name]) == reached  # the orders of the 7 days after it
    sessions_truth = build_session_truth(web)
    assert _sessions(spark, settings) == sessions_truth
    truth = build_attribution_truth(sessions_truth, orders)
    assert _table(spark, settings, ATTRIBUTION) == truth

    # Forget a buyer who came through a campaign: both inputs, then what reads them.
    attributed = {o.event["buyer_id"] for o in orders_of_visits(web)}
    buyer = next(
        s["user_id"] for s in sessions_truth
        if s["user_id"] in attributed and s["campaign_name"]
    )  # fmt: skip
    for spec in (WEB, SHOP):
        summary, code = run_steps(spark, settings, FORGET, spec, f"forget-{spec.name}", user=buyer)
        assert code == 0, summary
    assert [d.name for d in reached_by({WEB.name, SHOP.name})] == [
        d.name for d in DERIVED_PIPELINES
    ]
    _derive(spark, settings, "after-forget")
    forgotten = frozenset({buyer})
    without = build_session_truth(web, forgotten=forgotten)
    assert _sessions(spark, settings) == without
    assert buyer not in {s["user_id"] for s in _sessions(spark, settings)}
    assert _table(spark, settings, ATTRIBUTION) == build_attribution_truth(
        without, orders, forgotten=forgotten
    )
    assert _table(spark, settings, ATTRIBUTION) != truth, "the buyer's orders counted before"
