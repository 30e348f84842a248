"""Event time no client can poison: the collector's bound, the speed layer's, and recovery.

Real collector (in this process), Kafka, the speed job (``python -m
speed_layer`` in a subprocess) and Cassandra.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import orjson
import pytest

from core.event_time import CLAMPED_FUTURE, EventTimeBounds
from core.settings import CollectorSettings, EventTimeSettings, Settings
from ingest.simulator import SimulatorConfig, build_truth, generate, send
from ingest.simulator.direct import produce_direct
from tests.integration.asgi import serving
from tests.support.ports import free_port
from tests.support.web import WEB_VIEWS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

KEY = "event-time-key-0001"


@contextmanager
def _collector(settings: Settings) -> Iterator[str]:
    import uvicorn

    from ingest.app import create_app

    port = free_port()
    settings = settings.model_copy(
        update={"collector": CollectorSettings(port=port, write_keys={"site": KEY})}
    )
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    with serving(config) as url:
        yield url


def _records(settings: Settings, topic: str, timeout_s: float = 30) -> list:
    """Every record of ``topic`` up to its current end."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        settings.kafka.client_config()
        | {"group.id": f"reader-{time.monotonic_ns()}", "enable.auto.commit": False}
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p))[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records, deadline = [], time.monotonic() + timeout_s
        remaining = {p for p, end in ends.items() if end > 0}
        while remaining and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append(message)
                if message.offset() >= ends[message.partition()] - 1:
                    remaining.discard(message.partition())
        assert not remaining, f"{topic}: partitions {remaining} not read to their end"
    finally:
        consumer.close()
    return records


def _progress(session, settings: Settings) -> dict:
    table = f"{settings.cassandra.keyspace}.speed_progress"
    return {row.view_name: row for row in session.execute(f"SELECT * FROM {table}")}


def _minute(text: str) -> str:
    return text[:16] + ":00Z"


def _identify(message_id: str, **times: str) -> dict:
    return {"anonymousId": f"clock-{message_id}", "messageId": message_id, **times}


def test_extreme_times_end_where_the_rule_says_and_live_views_stay_exact(
    speed_settings, speed_job, cassandra_session, views_match_truth
):
    tolerance = EventTimeBounds.from_settings(speed_settings).future_tolerance
    with _collector(speed_settings) as url:
        with httpx.Client(base_url=url, auth=(KEY, ""), timeout=10) as client:
            answers = {
                "far-future": client.post(
                    "/v1/identify", json=_identify("far-future", timestamp="9999-12-31T23:59:59Z")
                ),
                "year-one": client.post(
                    "/v1/identify", json=_identify("year-one", timestamp="0001-01-01T00:00:00Z")
                ),
                "sent-in-9999": client.post(
                    "/v1/identify",
                    json=_identify(
                        "sent-in-9999",
                        timestamp=datetime.now(UTC).isoformat(),
                        sentAt="9999-12-31T23:59:59Z",
                    ),
                ),
                "imported-year-one": client.post(
                    "/v1/import",
                    json={
                        "batch": [
                            {"type": "identify"}
                            | _identify("imported-year-one", timestamp="0001-01-01T00:00Z")
                        ]
                    },
                ),
            }
        events = generate(
            SimulatorConfig(
                seed=12, events=1500, rate=300, duplicate_rate=0.05, skewed_client_rate=0.2
            )
        )
        report = send(events, url, KEY, None, 100, progress=False, time_mode="live")

    assert answers["far-future"].status_code == 200
    for name in ("year-one", "sent-in-9999"):
        assert answers[name].status_code == 400
        assert answers[name].json()["rejected"][0]["reason"] == "invalid:timestamp_too_old"
    (refused,) = answers["imported-year-one"].json()["rejected"]
    assert refused["reason"] == "invalid:timestamp_too_old"

    accepted = {
        orjson.loads(r.value())["event_id"]: r
        for r in _records(speed_settings, speed_settings.kafka.events_topic)
    }
    clamped = accepted["far-future"]
    event = orjson.loads(clamped.value())
    assert event["timestamp"] == event["receivedAt"]
    assert event["originalTimestamp"] == "9999-12-31T23:59:59Z"
    assert ("timestamp_adjusted", CLAMPED_FUTURE.encode()) in clamped.headers()
    letters = [
        orjson.loads(r.value()) for r in _records(speed_settings, speed_settings.kafka.dlq_topic)
    ]
    too_old = {
        letter["payload"].get("messageId")
        for letter in letters
        if letter["reason"] == "invalid:timestamp_too_old"
    }
    assert too_old == {"year-one", "sent-in-9999", "imported-year-one"}
    assert all(
        datetime.fromisoformat(orjson.loads(r.value())["timestamp"])
        <= datetime.fromisoformat(orjson.loads(r.value())["receivedAt"]) + tolerance
        for r in accepted.values()
    )

    speed_job.drain(speed_settings)

    # The ordinary traffic is exact; the clamped identify counts at its receive minute. The
    # time the collector gives an event (receivedAt - (sentAt - originalTimestamp)) is its
    # true time plus the request's latency, which on a loaded machine can carry it over a
    # minute's end: the truth takes the time each event's first delivery was given.
    given: dict[str, datetime] = {}
    for record in _records(speed_settings, speed_settings.kafka.events_topic):
        value = orjson.loads(record.value())
        given.setdefault(value["event_id"], datetime.fromisoformat(value["timestamp"]))
    truth = build_truth(
        [replace(e, time=given.get(e.message_id or "", e.time)) for e in report.events]
    )
    minute = _minute(event["receivedAt"])
    truth = replace(
        truth,
        events_per_minute={
            **truth.events_per_minute,
            minute: truth.events_per_minute.get(minute, 0) + 1,
        },
        visitors_per_minute={
            **truth.visitors_per_minute,
            minute: truth.visitors_per_minute.get(minute, 0) + 1,
        },
    )
    views_match_truth(truth, speed_settings)
    now = datetime.now(UTC)
    for view, row in _progress(cassandra_session, speed_settings).items():
        assert row.watermark is not None, view
        assert row.watermark.replace(tzinfo=UTC) <= now + tolerance, view
        assert not row.future_rows_dropped, view


def test_a_poisoned_checkpoint_is_reset_and_then_counts_exactly(
    speed_settings, speed_job, cassandra_session, views_match_truth
):
    from pipelines import pipeline
    from speed_layer.reset import ResetRefused, reset

    # A run without the bound (tolerance of ~30,000 years) lets one far-future record in.
    unbounded = speed_settings.model_copy(
        update={"event_time": EventTimeSettings(future_tolerance_s=1e12)}
    )
    _produce_far_future(unbounded)
    speed_job.drain(unbounded)
    progress = _progress(cassandra_session, speed_settings)
    assert progress["site_activity"].watermark.year == 9999

    # Ordinary traffic after it is "late" for good, also with the bound back on.
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    first = generate(SimulatorConfig(seed=5, events=600, rate=20, start=start))
    produce_direct(first, speed_settings)
    speed_job.drain(speed_settings)
    assert not cassandra_session.execute(
        f"SELECT * FROM {speed_settings.cassandra.keyspace}.speed_page_activity LIMIT 1"
    ).one()
    assert _progress(cassandra_session, speed_settings)["site_activity"].late_rows_dropped > 0

    # A live job refuses the reset (a view of the pipeline beat after the drain stopped);
    # the stopped one takes it, whatever another pipeline's views are doing.
    web = pipeline("web_events").stream_settings(speed_settings)
    table = f"{speed_settings.cassandra.keyspace}.speed_progress"
    beat = f"UPDATE {table} SET heartbeat_at = toTimestamp(now()) WHERE view_name = %s"
    cassandra_session.execute(beat, ("clicks",))
    with pytest.raises(ResetRefused, match="clicks"):
        reset(web, "earliest", views=WEB_VIEWS)
    cassandra_session.execute(
        f"UPDATE {table} SET stopped_at = toTimestamp(now()) WHERE view_name = 'clicks'"
    )
    cassandra_session.execute(beat, ("orders_by_currency",))  # another pipeline, alive
    run = reset(web, "earliest", views=WEB_VIEWS)
    cassandra_session.execute(f"DELETE FROM {table} WHERE view_name = 'orders_by_currency'")
    assert (run.generation, run.floor) == (1, None)  # the whole log: every window recomputed

    second = generate(
        SimulatorConfig(seed=6, events=600, rate=20, start=start + timedelta(minutes=10))
    )
    produce_direct(second, speed_settings)
    speed_job.drain(speed_settings)
    # The poisoned run's one window in year 9999 stays until the speed TTL expires it (no
    # answer reads a window after now); everything else is exactly the traffic.
    site = f"{speed_settings.cassandra.keyspace}.speed_site_activity"
    stray = [r.window_start for r in cassandra_session.execute(f"SELECT window_start FROM {site}")]
    assert [w.year for w in stray].count(9999) == 1
    cassandra_session.execute(f"DELETE FROM {site} WHERE site = 'all' AND day = '9999-12-31'")
    views_match_truth(build_truth([*first, *second]), speed_settings)
    now = datetime.now(UTC)
    for view, row in _progress(cassandra_session, speed_settings).items():
        assert row.watermark.replace(tzinfo=UTC) <= now + timedelta(seconds=60), view
        # The far-future record, refused this time, as silver refuses it.
        assert dict(row.rejected_rows) == {"invalid:timestamp_future": 1}, view
        assert row.run_generation == 1, view


def _produce_far_future(settings: Settings) -> None:
    from confluent_kafka import Producer

    from data_contracts import load_contract
    from data_contracts.derive import compile_fast_validator
    from ingest.enrich import RequestFacts
    from ingest.intake import Intake

    contract = load_contract("web_events", 1)
    intake = Intake(contract, compile_fast_validator(contract), 32 * 1024)
    lax = EventTimeBounds(future_tolerance=timedelta(days=10**7))
    facts = RequestFacts(datetime.now(UTC), "site", contract.version, bounds=lax)
    routed = intake.route(
        [{"type": "identify", **_identify("far-future", timestamp="9999-12-31T23:59:59Z")}], facts
    )
    (record,) = routed.accepted
    assert orjson.loads(record.value)["timestamp"].startswith("9999-12-31")
    producer = Producer(settings.kafka.client_config())
    producer.produce(settings.kafka.events_topic, record.value, record.key, headers=record.headers)
    assert producer.flush(30) == 0


def test_rejects_are_counted_by_reason_as_silver_rejects_them(
    speed_settings, speed_job, cassandra_session, views_match_truth
):
    """The speed layer checks records as silver does (views.input) and counts what it refuses."""
    from confluent_kafka import Producer

    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    events = generate(SimulatorConfig(seed=11, events=300, rate=20, start=start))
    produce_direct(events, speed_settings)
    stamp = start.isoformat().replace("+00:00", "Z")
    broken = [
        b"{not json",
        orjson.dumps({"type": "page", "anonymousId": "a", "timestamp": stamp}),
        orjson.dumps({"event_id": "no-time", "type": "page", "anonymousId": "a"}),
    ]
    producer = Producer(speed_settings.kafka.client_config())
    for value in broken:
        producer.produce(speed_settings.kafka.events_topic, value)
    assert producer.flush(30) == 0

    speed_job.drain(speed_settings)
    views_match_truth(build_truth(events), speed_settings)
    for view, row in _progress(cassandra_session, speed_settings).items():
        assert dict(row.rejected_rows) == {
            "unparseable": 1,
            "missing:event_id": 1,
            "missing:timestamp": 1,
        }, view
