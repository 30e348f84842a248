from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from data_contracts import load_contract
from data_contracts.derive import compile_validator
from ingest.enrich import RequestFacts
from ingest.intake import Intake

FACTS = RequestFacts(
    received_at=datetime(2026, 5, 1, 12, tzinfo=UTC), source_id="site", contract_version="1.0.0"
)


@pytest.fixture(scope="module")
def intake() -> Intake:
    contract = load_contract()
    return Intake(contract, compile_validator(contract), max_event_bytes=2048)


def test_every_event_is_either_accepted_or_dead_lettered(intake):
    events = [
        {"type": "page", "anonymousId": "a", "messageId": "1"},
        {"type": "page"},
        {"type": "track", "userId": "u", "event": "Element Clicked", "messageId": "2"},
        ["not", "an", "object"],
        {"type": "page", "anonymousId": "a", "properties": {"blob": "x" * 4000}},
        {"type": "page", "anonymousId": 2**70},
    ]
    routed = intake.route(events, FACTS)
    assert len(routed.accepted) + len(routed.dead_letters) == len(events)
    assert [r.index for r in routed.rejections] == [1, 3, 4, 5]
    assert [r.reason for r in routed.rejections] == [
        "rule:identity",
        "invalid:event",
        "too_large",
        "invalid:encoding",
    ]


def test_accepted_record_is_keyed_by_user_with_contract_headers(intake):
    routed = intake.route(
        [{"type": "track", "userId": "u-1", "anonymousId": "a-1", "event": "E", "messageId": "m"}],
        FACTS,
    )
    record = routed.accepted[0]
    assert record.key == b"u-1"  # userId wins over anonymousId
    headers = dict(record.headers)
    assert headers["contract"] == b"web-events/1.0.0"
    assert headers["event_id"] == b"m"
    assert json.loads(record.value)["source_id"] == "site"


def test_dead_letter_keeps_the_original_payload_and_reason(intake):
    original = {"type": "page", "messageId": "lost?", "properties": {"path": "/"}}
    routed = intake.route([original], FACTS)
    letter = json.loads(routed.dead_letters[0].value)
    assert letter["payload"] == original
    assert letter["reason"] == "rule:identity"
    assert letter["contract"] == "web-events/1.0.0"
    assert letter["received_at"] == "2026-05-01T12:00:00.000Z"
    assert routed.dead_letters[0].key == b"lost?"


def _nested(depth: int, leaf: object = None, kind: str = "object") -> object:
    value = leaf
    for _ in range(depth):
        value = {"a": value} if kind == "object" else [value]
    return value


@pytest.mark.parametrize("kind", ["object", "array"])
def test_an_event_nested_too_deep_is_dead_lettered_alone(intake, kind):
    # 1,000 levels parse (orjson allows 1,024) but overflow any recursive walk.
    deep = {"type": "page", "anonymousId": "a", "properties": {"x": _nested(1000, None, kind)}}
    fine = {"type": "page", "anonymousId": "a", "properties": {"x": _nested(30, 1, kind)}}
    routed = intake.route([deep, fine], FACTS)
    assert [(r.index, r.reason) for r in routed.rejections] == [(0, "invalid:too_deep")]
    assert "64 levels" in routed.rejections[0].detail
    assert len(routed.accepted) == 1
    letter = json.loads(routed.dead_letters[0].value)
    assert letter["reason"] == "invalid:too_deep"
    kept = letter["payload"]["properties"]["x"]
    for _ in range(62):  # kept down to level 64 (the event is 1, properties 2, x 3)
        kept = kept["a"] if kind == "object" else kept[0]
    assert kept == "<too deep>"


def test_a_deep_value_that_is_no_object_still_gets_its_letter(intake):
    routed = intake.route([_nested(1000, 1, "array")], FACTS)
    assert [r.reason for r in routed.rejections] == ["invalid:event"]
    assert json.loads(routed.dead_letters[0].value)["reason"] == "invalid:event"
