"""Hostile shapes against the collector and the real Kafka: a clear answer, a bounded log."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.integration

AUTH = ("test-write-key", "")


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def _page(message_id: str, properties: str) -> str:
    return (
        f'{{"type": "page", "anonymousId": "u-deep", "messageId": "{message_id}", '
        f'"properties": {properties}}}'
    )


def test_deep_nesting_is_refused_with_a_reason_not_a_crash(collector, consume):
    batch = f"[{_page('deep', _deep(1000))}, {_page('fine', _deep(20))}]"
    answer = httpx.post(
        f"{collector.url}/v1/batch",
        content=f'{{"batch": {batch}}}',
        auth=AUTH,
        headers={"content-type": "application/json"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 1
    ((rejected),) = answer.json()["rejected"]
    assert (rejected["index"], rejected["reason"]) == (0, "invalid:too_deep")

    single = httpx.post(
        f"{collector.url}/v1/page",
        content=_page("deep-single", _deep(1000)),
        auth=AUTH,
        headers={"content-type": "application/json"},
    )
    assert single.status_code == 400, single.text
    assert single.json()["rejected"][0]["reason"] == "invalid:too_deep"

    # Deeper than the parser goes: the body is refused whole, with what to fix.
    body = httpx.post(
        f"{collector.url}/v1/track",
        content=_deep(5000),
        auth=AUTH,
        headers={"content-type": "application/json"},
    )
    assert body.status_code == 400, body.text
    assert body.json()["error"] == "invalid_json"
    assert "depth" in body.json()["message"]

    letters = consume(collector.settings, collector.settings.kafka.dlq_topic, 2)
    by_key = {r.key(): json.loads(r.value()) for r in letters}
    assert set(by_key) == {b"deep", b"deep-single"}
    assert {letter["reason"] for letter in by_key.values()} == {"invalid:too_deep"}
    (event,) = consume(collector.settings, collector.settings.kafka.events_topic, 1)
    assert json.loads(event.value())["messageId"] == "fine"
