"""A batch refused whole keeps no call of a forgotten user in its dead letter.

A collector on the real local Kafka with a suppression recorded on its
suppressions topic; batches over the call limit are refused whole and
dead-lettered as one letter. The dead-letter topic is read back whole.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import httpx
import pytest

from core.suppressions import SuppressionRequest, record_suppression
from tests.support.collector import collector_settings, serve_collector
from tests.support.operator import operator

pytestmark = pytest.mark.integration

KEY_S = "s-write-key-0001"
AUTH = (KEY_S, "")
FORGOTTEN = "forgotten-user-7"
BUYER = "forgotten-in-checkouts-only-42"
"""Forgotten in the checkouts pipeline only: the website's events of this id are kept."""


def test_a_refused_batch_dead_letters_only_the_calls_of_users_not_forgotten(
    local_platform, unique_name, consume
):
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    settings = collector_settings(
        local_platform, unique_name, write_keys={"s": KEY_S}, max_batch_events=4
    )
    ensure_topics(AdminClient(settings.kafka.client_config()), platform_topics(settings.kafka))
    record_suppression(settings.kafka, SuppressionRequest(FORGOTTEN, datetime.now(UTC), "t-1"))
    scoped = SuppressionRequest(BUYER, datetime.now(UTC), "t-2", pipeline="checkouts")
    record_suppression(settings.kafka, scoped)
    page = {"type": "page", "properties": {"path": "/p"}}
    mixed = [
        {**page, "messageId": "f1", "userId": FORGOTTEN},
        {**page, "messageId": "f2", "anonymousId": FORGOTTEN},
        {**page, "messageId": "o1", "userId": "someone-else"},
        {**page, "messageId": "o3", "userId": BUYER},
        {**page, "messageId": "f3", "userId": FORGOTTEN, "anonymousId": "their-browser"},
        {**page, "messageId": "o2", "anonymousId": "another-browser"},
    ]
    theirs_only = [{**page, "messageId": f"g{n}", "userId": FORGOTTEN} for n in range(len(mixed))]

    with serve_collector(settings, KEY_S) as running:
        health = httpx.get(f"{running.url}/health", headers=operator(settings), timeout=30)
        health = health.json()
        assert health["suppressions"]["loaded"] and health["suppressions"]["size"] == 2
        answers = [
            httpx.post(f"{running.url}/v1/batch", json={"batch": b}, auth=AUTH, timeout=30)
            for b in (mixed, theirs_only)
        ]
        metrics = httpx.get(f"{running.url}/metrics", headers=operator(settings), timeout=30)
        metrics = metrics.text
        letters = consume(settings, settings.kafka.dlq_topic, 1, timeout_s=20)

    # Both answers are the usual refusal: they do not tell who was forgotten.
    assert [a.status_code for a in answers] == [400, 400]
    assert answers[0].json() == answers[1].json()
    assert answers[0].json()["error"] == "too_many_events"
    # One letter, for the mixed batch, holding the other users' calls only: those of the
    # person forgotten in checkouts only are web events, kept.
    assert len(letters) == 1
    letter = json.loads(letters[0].value())
    assert letter["reason"] == "batch:too_many_events" and letter["events"] == 3
    kept = [c["messageId"] for c in json.loads(letter["payload"])["batch"]]
    assert kept == ["o1", "o3", "o2"]
    for record in letters:
        everything = (record.value() or b"") + (record.key() or b"")
        everything += b"".join(value or b"" for _, value in record.headers() or [])
        assert FORGOTTEN.encode() not in everything and b"their-browser" not in everything
    assert 'collector_events_dropped_total{reason="suppressed"} 9.0' in metrics
