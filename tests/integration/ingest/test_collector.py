"""The collector against the real Kafka: what is answered 200 is in the log."""

from __future__ import annotations

import json
from collections import defaultdict

import httpx
import pytest

from tests.support.operator import operator

pytestmark = pytest.mark.integration

AUTH = ("test-write-key-0001", "")


def _page(i: int, user: str) -> dict:
    return {
        "type": "page",
        "messageId": f"{user}-{i}",
        "anonymousId": user,
        "properties": {"path": f"/p{i % 3}", "load_time_ms": 100 + i},
        "originalTimestamp": "2026-11-21T10:00:00.000Z",
        "sentAt": "2026-11-21T10:00:01.000Z",
    }


def test_official_segment_library_delivers_enriched_events(collector, consume):
    import segment.analytics as analytics

    client = analytics.Client(
        collector.write_key, host=collector.url, sync_mode=True, max_retries=1
    )
    client.page(anonymous_id="anon-1", name="Home", properties={"path": "/", "load_time_ms": 80})
    client.track(
        user_id="user-7", event="Site Searched", properties={"query": "shoes", "results_count": 3}
    )
    client.identify(user_id="user-7", traits={"plan": "pro"})
    client.flush()

    records = consume(collector.settings, collector.settings.kafka.events_topic, 3)
    events = {json.loads(r.value())["type"]: (r, json.loads(r.value())) for r in records}
    assert set(events) == {"page", "track", "identify"}
    record, page = events["page"]
    assert record.key() == b"anon-1"
    assert page["event_id"] == page["messageId"]
    assert page["source_id"] == "test-site"
    assert page["contract_version"] == "1.1.0"
    assert page["receivedAt"].endswith("Z") and page["timestamp"].endswith("Z")
    assert page["context"]["library"]["name"] == "analytics-python"
    headers = dict(record.headers())
    assert headers["contract"] == b"web-events/1.1.0"
    assert headers["event_id"] == page["event_id"].encode()
    assert events["track"][0].key() == b"user-7"


def test_mixed_batch_splits_valid_and_invalid_and_keeps_order(collector, consume):
    users = [f"u{n}" for n in range(4)]
    valid = [_page(i, users[i % 4]) for i in range(40)]
    invalid = [
        {"type": "page", "properties": {"path": "/x"}},  # nobody
        {"type": "track", "anonymousId": "u1", "messageId": "bad-track"},  # no event name
        {"type": "page", "anonymousId": "u2", "properties": {"load_time_ms": -5}},
        "not an event",
    ]
    batch = valid[:20] + invalid + valid[20:]
    answer = httpx.post(f"{collector.url}/v1/batch", json={"batch": batch}, auth=AUTH)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["accepted"] == 40
    reasons = {r["index"]: r["reason"] for r in body["rejected"]}
    assert reasons == {
        20: "rule:identity",
        21: "rule:track_has_event_name",
        22: "invalid:properties.load_time_ms",
        23: "invalid:event",
    }

    accepted = consume(collector.settings, collector.settings.kafka.events_topic, 40)
    assert sorted(json.loads(r.value())["messageId"] for r in accepted) == sorted(
        e["messageId"] for e in valid
    )
    # One user's events stay on one partition, in the order they were sent.
    by_user: dict[bytes, list] = defaultdict(list)
    for record in sorted(accepted, key=lambda r: (r.partition(), r.offset())):
        by_user[record.key()].append((record.partition(), json.loads(record.value())["messageId"]))
    for user, seen in by_user.items():
        assert len({partition for partition, _ in seen}) == 1
        sent = [e["messageId"] for e in valid if e["anonymousId"].encode() == user]
        assert [message_id for _, message_id in seen] == sent

    letters = consume(collector.settings, collector.settings.kafka.dlq_topic, 4)
    assert len(letters) == 4
    parsed = [json.loads(r.value()) for r in letters]
    assert {p["reason"] for p in parsed} == set(reasons.values())
    assert {"payload", "reason", "detail", "contract", "received_at", "source_id"} <= set(parsed[0])
    assert "not an event" in [p["payload"] for p in parsed]


def test_engaged_time_of_1_1_is_accepted_when_sent_and_optional(collector, consume):
    with_it = _page(1, "u1") | {"messageId": "engaged"}
    with_it["properties"] |= {"engaged_ms": 4250.5}
    without = _page(2, "u1") | {"messageId": "plain"}  # as every 1.0 producer sends
    wrong = _page(3, "u1") | {"messageId": "wrong"}
    wrong["properties"] |= {"engaged_ms": "4 s"}
    answer = httpx.post(
        f"{collector.url}/v1/batch", json={"batch": [with_it, without, wrong]}, auth=AUTH
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 2
    assert [(r["index"], r["reason"]) for r in answer.json()["rejected"]] == [
        (2, "invalid:properties.engaged_ms")
    ]

    accepted = consume(collector.settings, collector.settings.kafka.events_topic, 2)
    events = {json.loads(r.value())["messageId"]: (r, json.loads(r.value())) for r in accepted}
    assert set(events) == {"engaged", "plain"}
    assert events["engaged"][1]["properties"]["engaged_ms"] == 4250.5
    assert "engaged_ms" not in events["plain"][1]["properties"]
    for record, event in events.values():
        assert event["contract_version"] == "1.1.0"
        assert dict(record.headers())["contract"] == b"web-events/1.1.0"
    (letter,) = consume(collector.settings, collector.settings.kafka.dlq_topic, 1)
    assert json.loads(letter.value())["payload"]["properties"]["engaged_ms"] == "4 s"


def test_single_invalid_call_is_400_and_dead_lettered(collector, consume):
    answer = httpx.post(
        f"{collector.url}/v1/track", json={"anonymousId": "a", "messageId": "m-9"}, auth=AUTH
    )
    assert answer.status_code == 400
    assert answer.json()["rejected"][0]["reason"] == "rule:track_has_event_name"
    letters = consume(collector.settings, collector.settings.kafka.dlq_topic, 1)
    assert json.loads(letters[0].value())["payload"]["messageId"] == "m-9"


@pytest.mark.parametrize(
    ("kwargs", "status", "error"),
    [
        ({"json": {"batch": []}}, 401, "unauthorized"),
        ({"json": {"batch": []}, "auth": ("wrong", "")}, 401, "unauthorized"),
        ({"content": b"{nope", "auth": AUTH}, 400, "invalid_json"),
        ({"json": {"events": []}, "auth": AUTH}, 400, "invalid_batch"),
        ({"content": b"[" + b"1," * 300_000 + b"1]", "auth": AUTH}, 413, "too_large"),
    ],
)
def test_bad_requests_get_clear_errors(collector, kwargs, status, error):
    answer = httpx.post(f"{collector.url}/v1/batch", **kwargs)
    assert answer.status_code == status
    assert answer.json()["error"] == error
    assert answer.json()["message"]


def test_oversized_event_in_a_batch_is_rejected_alone(collector):
    big = _page(1, "big") | {"properties": {"path": "/", "blob": "x" * 40_000}}
    answer = httpx.post(
        f"{collector.url}/v1/batch", json={"batch": [big, _page(2, "ok")]}, auth=AUTH
    )
    assert answer.status_code == 200
    assert answer.json()["accepted"] == 1
    assert answer.json()["rejected"][0]["reason"] == "too_large"


def test_write_key_in_body_and_health_and_metrics(collector):
    answer = httpx.post(
        f"{collector.url}/v1/page", json=_page(1, "wk") | {"writeKey": "test-write-key-0001"}
    )
    assert answer.status_code == 200
    health = httpx.get(f"{collector.url}/health", headers=operator(collector.settings)).json()
    assert health["kafka"] == "reachable"
    metrics = httpx.get(f"{collector.url}/metrics", headers=operator(collector.settings)).text
    assert 'collector_events_accepted_total{pipeline="web_events"} 1.0' in metrics
    assert "collector_produce_latency_seconds_bucket" in metrics
    assert "collector_producer_queue_depth" in metrics
