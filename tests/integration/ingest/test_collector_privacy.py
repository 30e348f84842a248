"""No raw IP address reaches Kafka: the collector anonymises before it produces.

Events are posted through a collector on the real local Kafka, from
127.0.0.1 (the address the collector fills in when a call has none), with
client addresses in calls and in a batch's context; the events topic and the
dead-letter topic are then read back whole.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import socket

import httpx
import pytest

from tests.support.collector import collector_settings, serve_collector

pytestmark = pytest.mark.integration

KEY_S = "s-write-key-0001"
AUTH = (KEY_S, "")
KEY = "integration-test-key-" + "0" * 16
RAW = ("127.0.0.1", "192.0.2.77", "198.51.100.23", "2001:db8:aa:bb::9", "jane@example.com")
"""Every address (and the one non-address) the requests carry."""


def _collector(base, name: str, **collector: object):
    """A collector of one source (write key ``k``) that refuses batches of more than 4 calls."""
    settings = collector_settings(
        base, name, write_keys={"s": KEY_S}, max_batch_events=4, **collector
    )
    return serve_collector(settings, KEY_S)


def _post(url: str, path: str, body: object) -> httpx.Response:
    return httpx.post(f"{url}{path}", json=body, auth=AUTH, timeout=10)


def _send(url: str) -> None:
    page = {"type": "page", "anonymousId": "a", "name": "Home"}
    ok = [
        _post(url, "/v1/page", {**page, "messageId": "p1", "context": {"ip": "192.0.2.77"}}),
        _post(url, "/v1/page", {**page, "messageId": "p2"}),  # the request's address
        _post(
            url,
            "/v1/batch",
            {
                "context": {"ip": "2001:db8:aa:bb::9"},  # a batch context holds an address
                "batch": [
                    {**page, "messageId": "b1"},
                    {**page, "messageId": "b2", "context": {"ip": "::ffff:198.51.100.23"}},
                    {**page, "messageId": "b3", "context": {"ip": "jane@example.com"}},
                    {"type": "page", "messageId": "b4", "context": {"ip": "192.0.2.77"}},
                ],
            },
        ),
    ]
    assert [r.status_code for r in ok] == [200, 200, 200], [r.text for r in ok]
    assert [r["messageId"] for r in ok[2].json()["rejected"]] == ["b4"]  # no user
    refused = _post(  # more calls than the limit: one letter holding the body
        url, "/v1/batch", {"batch": [{**page, "context": {"ip": "192.0.2.77"}}] * 5}
    )
    assert refused.status_code == 400 and refused.json()["dead_lettered"] is True


def _read(running, consume) -> tuple[dict[str, dict], list[dict]]:
    kafka = running.settings.kafka
    events = consume(running.settings, kafka.events_topic, 5)
    letters = consume(running.settings, kafka.dlq_topic, 2)
    for record in events + letters:
        everything = (record.value() or b"") + (record.key() or b"")
        everything += b"".join(value or b"" for _, value in record.headers() or [])
        for raw in RAW:
            assert raw.encode() not in everything, (raw, everything)
    by_id = {e["messageId"]: e for e in (json.loads(r.value()) for r in events)}
    return by_id, [json.loads(r.value()) for r in letters]


def test_by_default_addresses_are_truncated_in_events_and_dead_letters(
    local_platform, unique_name, consume
):
    with _collector(local_platform, unique_name) as running:
        _send(running.url)
        events, letters = _read(running, consume)
    assert {i: e["context"]["ip"] for i, e in events.items()} == {
        "p1": "192.0.2.0",
        "p2": "127.0.0.0",
        "b1": "2001:db8:aa::",
        "b2": "198.51.100.0",
        # The call's own value wins over the batch context's; not an address, it counts as
        # absent, and the collector fills in the request's.
        "b3": "127.0.0.0",
    }
    by_reason = {letter["reason"]: letter for letter in letters}
    assert by_reason["rule:identity"]["payload"]["context"]["ip"] == "192.0.2.0"
    refused = by_reason["batch:too_many_events"]
    assert refused["payload_anonymised"] is True
    assert {c["context"]["ip"] for c in json.loads(refused["payload"])["batch"]} == {"192.0.2.0"}


def _hmac(address: str) -> str:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    packed = socket.inet_pton(family, address)
    return hmac.new(KEY.encode(), packed, hashlib.sha256).hexdigest()


def test_with_the_hash_setting_addresses_are_keyed_hashes(local_platform, unique_name, consume):
    with _collector(local_platform, unique_name, ip_anonymisation="hash", hash_key=KEY) as running:
        _send(running.url)
        events, letters = _read(running, consume)
    assert {i: e["context"]["ip"] for i, e in events.items()} == {
        "p1": _hmac("192.0.2.77"),
        "p2": _hmac("127.0.0.1"),
        "b1": _hmac("2001:db8:aa:bb::9"),
        "b2": _hmac("198.51.100.23"),
        "b3": _hmac("127.0.0.1"),
    }
    by_reason = {letter["reason"]: letter for letter in letters}
    assert by_reason["rule:identity"]["payload"]["context"]["ip"] == _hmac("192.0.2.77")
    refused = json.loads(by_reason["batch:too_many_events"]["payload"])
    assert {c["context"]["ip"] for c in refused["batch"]} == {_hmac("192.0.2.77")}
