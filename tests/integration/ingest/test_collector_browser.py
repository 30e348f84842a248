"""The collector as browsers and compressing libraries call it, against the real Kafka.

analytics.js's one-letter paths and ``/v1/b`` with ``text/plain`` bodies and
the write key in the body; CORS per source (a production-like source refuses
other origins, a development source takes any); gzip and deflate bodies,
limited on their decoded size (a gzip bomb gets 413 at once).
"""

from __future__ import annotations

import gzip
import json
import resource
import uuid
import zlib

import httpx
import pytest

from tests.support.collector import collector_settings, serve_collector
from tests.support.operator import operator

pytestmark = pytest.mark.integration

PAGE = "http://127.0.0.1:5555"
SHOP = "https://shop.example"
EVIL = "https://evil.example"
TEXT = {"content-type": "text/plain"}


@pytest.fixture
def site(local_platform, unique_name):
    settings = collector_settings(
        local_platform,
        unique_name,
        write_keys={"site": "site-write-key-0001", "shop": "shop-write-key-0001"},
        allowed_origins={"site": ["*"], "shop": [SHOP]},
    )
    with serve_collector(settings, "site-write-key-0001") as running:
        yield running


def _call(kind: str, run: str, n: int, **fields) -> dict:
    return {
        "type": kind,
        "messageId": f"{run}-{kind}-{n}",
        "anonymousId": f"visitor-{run}",
        "context": {"page": {"path": "/", "url": f"{PAGE}/"}, "userAgent": "test"},
        "timestamp": "2026-11-21T10:00:00.000Z",
        "sentAt": "2026-11-21T10:00:00.100Z",
        **fields,
    }


def _by_message_id(records) -> dict[str, dict]:
    return {json.loads(r.value())["messageId"]: json.loads(r.value()) for r in records}


def test_analytics_js_paths_and_text_plain_bodies_are_accepted(site, consume) -> None:
    run = uuid.uuid4().hex[:8]
    calls = {
        "t": _call("track", run, 0, event="Site Searched", properties={"query": "shoes"}),
        "p": _call("page", run, 0, properties={"path": "/"}),
        "i": _call("identify", run, 0, userId="u-1", traits={"plan": "pro"}),
        "g": _call("group", run, 0, userId="u-1", groupId="g-1"),
        "a": _call("alias", run, 0, userId="u-1", previousId=f"visitor-{run}"),
        "s": _call("screen", run, 0, name="Home"),
    }
    for path, call in calls.items():
        body = json.dumps({**call, "writeKey": "site-write-key-0001"})
        answer = httpx.post(f"{site.url}/v1/{path}", content=body, headers={**TEXT, "origin": PAGE})
        assert answer.status_code == 200, (path, answer.text)
        assert answer.headers["access-control-allow-origin"] == PAGE
    batch = [_call("page", run, n, properties={"path": f"/b{n}"}) for n in (1, 2)]
    body = {"writeKey": "site-write-key-0001", "batch": batch, "sentAt": "2026-11-21T10:00:00.200Z"}
    answer = httpx.post(f"{site.url}/v1/b", content=json.dumps(body), headers=TEXT)
    assert answer.status_code == 200 and answer.json()["accepted"] == 2

    events = _by_message_id(consume(site.settings, site.settings.kafka.events_topic, 8))
    assert len(events) == 8
    for call in [*calls.values(), *batch]:
        event = events[call["messageId"]]
        assert event["type"] == call["type"]
        assert event["source_id"] == "site"
        assert event["event_id"] == call["messageId"]
        assert "writeKey" not in event


def test_cors_refuses_an_origin_a_production_source_does_not_list(site, consume) -> None:
    preflight = {
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type",
    }
    allowed = httpx.options(f"{site.url}/v1/t", headers={"origin": SHOP, **preflight})
    assert allowed.status_code == 204
    assert allowed.headers["access-control-allow-origin"] == SHOP
    assert allowed.headers["access-control-allow-headers"] == "authorization,content-type"

    run = uuid.uuid4().hex[:8]
    kept = _call("page", run, 0, properties={"path": "/kept"})
    refused = _call("page", run, 1, properties={"path": "/refused"})
    answer = httpx.post(
        f"{site.url}/v1/p",
        content=json.dumps({**refused, "writeKey": "shop-write-key-0001"}),
        headers={**TEXT, "origin": EVIL},
    )
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"] == "origin_not_allowed"
    assert EVIL in answer.json()["message"]
    answer = httpx.post(
        f"{site.url}/v1/p",
        content=json.dumps({**kept, "writeKey": "shop-write-key-0001"}),
        headers={**TEXT, "origin": SHOP},
    )
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == SHOP

    events = _by_message_id(consume(site.settings, site.settings.kafka.events_topic, 1))
    assert set(events) == {kept["messageId"]}
    assert events[kept["messageId"]]["source_id"] == "shop"
    metrics = httpx.get(f"{site.url}/metrics", headers=operator(site.settings)).text
    assert 'collector_request_errors_total{reason="origin"} 1.0' in metrics


def test_gzip_and_deflate_bodies_are_decoded(site, consume) -> None:
    run = uuid.uuid4().hex[:8]
    sent = []
    for n, (encoding, encode) in enumerate((("gzip", gzip.compress), ("deflate", zlib.compress))):
        batch = [_call("page", run, 10 * n + i, properties={"path": f"/z{i}"}) for i in range(5)]
        sent += batch
        answer = httpx.post(
            f"{site.url}/v1/batch",
            content=encode(json.dumps({"batch": batch}).encode()),
            headers={"content-type": "application/json", "content-encoding": encoding},
            auth=("site-write-key-0001", ""),
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["accepted"] == 5
    events = _by_message_id(consume(site.settings, site.settings.kafka.events_topic, 10))
    assert set(events) == {e["messageId"] for e in sent}


def test_a_gzip_bomb_gets_413_with_bounded_memory(site, consume) -> None:
    limit = site.settings.collector.max_request_bytes
    bomb = gzip.compress(b" " * (200 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < limit  # small on the wire, 200 MB once inflated
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    answer = httpx.post(
        f"{site.url}/v1/batch",
        content=bomb,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        auth=("site-write-key-0001", ""),
    )
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == "too_large"
    assert "after decompression" in answer.json()["message"]
    assert grown_kb < 64 * 1024, f"the collector's process grew by {grown_kb} KB"
    assert consume(site.settings, site.settings.kafka.events_topic, 0) == []
    assert httpx.get(f"{site.url}/health").status_code == 200
