"""Hostile shapes against the collector and the real Kafka: a clear answer, a bounded log."""

from __future__ import annotations

import json

import httpx
import pytest

pytestmark = pytest.mark.integration

AUTH = ("test-write-key-0001", "")


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


def test_a_garbage_batch_is_one_dead_letter_not_thousands(collector, consume):
    body = {"batch": [1] * 2000}
    answer = httpx.post(f"{collector.url}/v1/batch", json=body, auth=AUTH)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "invalid_batch"
    assert answer.json()["dead_lettered"] is True

    pages = [{"type": "page", "anonymousId": "u", "messageId": f"m{i}"} for i in range(2501)]
    answer = httpx.post(f"{collector.url}/v1/import", json={"batch": pages}, auth=AUTH)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == "too_many_events"
    assert "2500" in answer.json()["message"]

    letters = consume(collector.settings, collector.settings.kafka.dlq_topic, 2)
    assert len(letters) == 2  # one per request, however many calls it held
    first, second = sorted((json.loads(r.value()) for r in letters), key=lambda x: x["events"])
    assert (first["reason"], first["events"]) == ("batch:not_objects", 2000)
    assert json.loads(first["payload"]) == body
    assert (second["reason"], second["events"]) == ("batch:too_many_events", 2501)
    assert json.loads(second["payload"])["batch"] == pages
    assert consume(collector.settings, collector.settings.kafka.events_topic, 0) == []


def test_a_full_queue_refuses_a_request_whole(local_platform, unique_name, consume):
    """The 503 says what was kept: here nothing, and the log agrees."""
    import asyncio

    from tests.support.collector import collector_settings, serve_collector

    settings = collector_settings(
        local_platform,
        unique_name,
        write_keys={"test-site": "test-write-key-0001"},
        queue_max_messages=2500,
        linger_ms=3000,  # the first request's records wait in the queue for 3 s
        delivery_timeout_s=20,
    )

    def pages(tag: str) -> dict:
        return {
            "batch": [
                {"type": "page", "anonymousId": f"u{i % 7}", "messageId": f"{tag}-{i}"}
                for i in range(1500)
            ]
        }

    async def two_requests(url: str) -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(auth=AUTH, timeout=60) as client:
            first = asyncio.create_task(client.post(f"{url}/v1/batch", json=pages("first")))
            await asyncio.sleep(1.0)
            second = await client.post(f"{url}/v1/batch", json=pages("second"))
            return await first, second

    with serve_collector(settings, "test-write-key-0001") as running:
        first, second = asyncio.run(two_requests(running.url))
        assert first.status_code == 200, first.text
        assert second.status_code == 503, second.text
        assert "nothing of this request was kept" in second.json()["message"]
        records = consume(settings, settings.kafka.events_topic, 1500, timeout_s=30)
    ids = [json.loads(r.value())["messageId"] for r in records]
    assert len(ids) == 1500
    assert all(i.startswith("first-") for i in ids)
