"""Kafka stopped under the collector: 503 with Retry-After, and nothing answered 200 is lost."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from platformctl import platform

# Stops the shared Kafka: run alone, after the parallel part of the suite.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.exclusive]

AUTH = ("test-write-key-0001", "")


def _batch(tag: str, n: int = 10) -> list[dict]:
    return [
        {
            "type": "page",
            "messageId": f"{tag}-{i}",
            "anonymousId": f"user-{i % 3}",
            "properties": {"path": "/outage"},
        }
        for i in range(n)
    ]


def test_kafka_down_means_503_and_no_acknowledged_event_is_lost(collector, consume):
    acknowledged: list[str] = []

    def send(tag: str) -> httpx.Response:
        batch = _batch(tag)
        answer = httpx.post(
            f"{collector.url}/v1/batch", json={"batch": batch}, auth=AUTH, timeout=30
        )
        if answer.status_code == 200:
            acknowledged.extend(e["messageId"] for e in batch)
        return answer

    assert send("before").status_code == 200

    platform.down(collector.settings, ("kafka",))
    try:
        refused = send("during")
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "2"
        assert refused.json()["error"] == "kafka_unavailable"
        assert httpx.get(f"{collector.url}/health", timeout=30).status_code == 503
    finally:
        platform.up(collector.settings, ("kafka",), install_missing=False)

    # The producer reconnects by itself; clients retrying get 200 again.
    deadline = time.monotonic() + 90
    statuses = []
    while time.monotonic() < deadline:
        statuses.append(send(f"after-{len(statuses)}").status_code)
        if statuses[-1] == 200:
            break
        time.sleep(1)
    assert statuses[-1] == 200, statuses
    assert set(statuses) <= {200, 503}  # refusals while reconnecting, never a crash

    records = consume(collector.settings, collector.settings.kafka.events_topic, len(acknowledged))
    in_log = {json.loads(r.value())["messageId"] for r in records}
    assert set(acknowledged) <= in_log, set(acknowledged) - in_log
