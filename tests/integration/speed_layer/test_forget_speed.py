"""A person forgotten while the speed layer runs is gone from what it serves: the windows
they were counted in are recounted without them by a replay the speed job asks for itself,
and their later events are not counted at all.

Before, the speed layer knew nothing of forgets: its rows (and their distinct-user sketches)
kept counting the person for as long as the windows stayed after the batch boundary (up to
the speed TTL, three days), and a producer pipeline's new events of theirs were counted too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.suppressions import SuppressionRequest, record_suppression
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from pipelines.simulators import checkouts as shop
from tests.support.checkouts import (
    CHECKOUTS,
    checkout_records,
    orders_counted,
    streaming_checkouts,
)
from tests.support.isolation import (
    Seen,
    publish_boundary,
    seen,
    serving_api,
    with_own_serving,
)
from tests.support.speed import SpeedThread

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _of(user: str, event) -> bool:
    payload = event.payload
    return isinstance(payload, dict) and user in (payload.get("userId"), payload.get("anonymousId"))


def _as(person: str, events, every: int = 5):
    """``events`` with every ``every``-th page view or track call (each copy of it) sent by
    ``person``, an anonymous visitor."""
    ids = {
        e.payload["messageId"]
        for i, e in enumerate(events)
        if i % every == 0
        and e.defect is None
        and isinstance(e.payload, dict)
        and e.payload.get("type") in ("page", "track")
    }
    for event in events:
        if isinstance(event.payload, dict) and event.payload.get("messageId") in ids:
            event.payload["anonymousId"] = person
            event.payload.pop("userId", None)
    return events


def _most_active(events) -> str:
    """The anonymousId with the most valid events (a visitor in many windows)."""
    counts: dict[str, int] = {}
    for event in events:
        if event.defect is None and isinstance(event.payload, dict):
            who = event.payload.get("anonymousId")
            counts[who] = counts.get(who, 0) + 1
    return max(counts, key=counts.__getitem__)


def _bought_by(person: str, records, every: int = 6):
    """``records`` (checkouts) with every ``every``-th completed order (each copy of it)
    placed by ``person``."""
    ids = {
        r.event["event_id"]
        for i, r in enumerate(records)
        if i % every == 0 and r.event is not None and r.event["type"] == "order_completed"
    }
    out = []
    for record in records:
        if record.event is not None and record.event["event_id"] in ids:
            event = {**record.event, "buyer_id": person}
            value = json.dumps(event).encode()
            record = replace(record, key=person.encode(), value=value, event=event)
        out.append(record)
    return out


def test_a_forgotten_person_is_recounted_out_of_the_speed_views(
    replay_settings,
    kafka_topic,
    spark,
    cassandra_session,
    read_view,
    views_match_truth,
    speed_version,
    wait_for,
):
    """The person is forgotten in the web pipeline only, and is a buyer in the checkouts
    pipeline the job streams too: what the checkouts pipeline's users see (its speed rows,
    runs and version, its published boundary, serving's answers and health verdict for it)
    is as it was before the forget, and its queries go on counting the person's orders."""
    speed = replay_settings.speed.model_copy(update={"forget_recount_after_s": 1.0})
    settings = replay_settings.model_copy(update={"speed": speed})
    settings = with_own_serving(streaming_checkouts(settings, kafka_topic))
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    history = generate(
        SimulatorConfig(seed=51, events=900, rate=3.0, users=40, start=now - timedelta(minutes=8))
    )
    person = _most_active(history)
    assert sum(_of(person, e) for e in history) >= 10
    produce_direct(history, settings)
    orders = _bought_by(person, checkout_records(seed=53, start=now - timedelta(minutes=20)))
    assert sum(r.event is not None and r.event["buyer_id"] == person for r in orders) >= 5
    shop.produce(orders, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))
    publish_boundary(cassandra_session, settings, "orders_by_currency", now - timedelta(hours=1))
    span = (now - timedelta(minutes=30), now + timedelta(minutes=10))
    site = f"{settings.cassandra.keyspace}.speed_site_activity"

    def counted(truth):
        def check() -> bool:
            rows = cassandra_session.execute(f"SELECT events FROM {site}")
            return sum(r.events for r in rows) == truth.valid_events

        return check

    history_counted = counted(build_truth(history))
    orders_in = orders_counted(read_view, settings, shop.build_truth(orders))

    def settled() -> Seen | None:
        """Both pipelines' history counted, and serving says checkouts' views are fresh."""
        if not (history_counted() and orders_in()):
            return None
        found = seen(cassandra_session, settings, CHECKOUTS, api=api, span=span)
        return found if found.fresh else None

    with SpeedThread(spark, settings) as job, serving_api(settings) as api:
        before = wait_for(settled, 240, "both pipelines' history", job)

        forget = SuppressionRequest(person, datetime.now(UTC), "test-forget", pipeline="web_events")
        record_suppression(settings.kafka, forget)
        wait_for(
            lambda: speed_version(settings, "site_activity") == 1,
            240,
            "the speed job to replay without the forgotten person and switch",
            job,
        )
        after = seen(cassandra_session, settings, CHECKOUTS, api=api, span=span)
        assert before.changes(after) == {}, "checkouts, once the web pipeline forgot a person"
        site = f"{settings.cassandra.keyspace}.speed_v1_site_activity"
        # Their events sent after the forget reach the topic (a producer pipeline's would),
        # and are not counted; their orders are (they were not forgotten in checkouts).
        later = _as(
            person,
            generate(
                SimulatorConfig(seed=52, events=300, rate=20.0, users=40, start=datetime.now(UTC))
            ),
        )
        assert sum(_of(person, e) for e in later) >= 10
        produce_direct(later, settings)
        more = _bought_by(person, checkout_records(seed=54, start=now - timedelta(minutes=2)))
        shop.produce(more, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))
        truth = build_truth([e for e in history + later if not _of(person, e)])
        wait_for(counted(truth), 240, "every event but the person's to be counted", job)
        everyone = shop.build_truth(orders + more)
        wait_for(orders_counted(read_view, settings, everyone), 240, "every order", job)

    views_match_truth(truth, settings)
    assert speed_version(settings, "orders_by_currency") == 0, "checkouts was not replayed"
