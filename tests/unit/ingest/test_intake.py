from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from data_contracts import load_contract
from data_contracts.derive import compile_validator
from ingest.enrich import RequestFacts
from ingest.intake import MAX_LETTER_BYTES, Intake

FACTS = RequestFacts(
    received_at=datetime(2026, 5, 1, 12, tzinfo=UTC), source_id="site", contract_version="1.0.0"
)


@pytest.fixture(scope="module")
def intake() -> Intake:
    contract = load_contract("web_events", 1)
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
    assert headers["contract"] == b"web-events/1.1.0"
    assert headers["event_id"] == b"m"
    assert json.loads(record.value)["source_id"] == "site"


def test_dead_letter_keeps_the_original_payload_and_reason(intake):
    original = {"type": "page", "messageId": "lost?", "properties": {"path": "/"}}
    routed = intake.route([original], FACTS)
    letter = json.loads(routed.dead_letters[0].value)
    assert letter["payload"] == original
    assert letter["reason"] == "rule:identity"
    assert letter["detail"] == routed.rejections[0].detail
    assert letter["detail"].startswith("Every event names its user")
    assert letter["contract"] == "web-events/1.1.0"
    assert letter["received_at"] == "2026-05-01T12:00:00.000Z"
    assert routed.dead_letters[0].key == b"lost?"
    assert dict(routed.dead_letters[0].headers)["reason"] == b"rule:identity"


def test_dead_letter_keeps_what_a_replay_needs_of_the_request(intake):
    facts = RequestFacts(
        received_at=FACTS.received_at,
        source_id="site",
        contract_version="1.0.0",
        call_type="page",
        sent_at="2026-05-01T11:59:58Z",
        ip="198.51.100.7",
        historical=True,
    )
    routed = intake.route([{"type": "page"}], facts, first_index=4)
    assert [r.index for r in routed.rejections] == [4]
    assert json.loads(routed.dead_letters[0].value)["request"] == {
        "call_type": "page",
        "sent_at": "2026-05-01T11:59:58Z",
        "historical": True,
        "ip": "198.51.100.0",  # as anonymised for the events: no raw address in a letter
        "index": 4,
    }
    # A batch-level sentAt that is no date is kept short: every letter of the batch has it.
    garbage = RequestFacts(FACTS.received_at, "site", "1.0.0", sent_at=["x" * 10_000])
    letter = json.loads(intake.route([{"type": "page"}], garbage).dead_letters[0].value)
    assert letter["request"]["sent_at"] == repr(["x" * 10_000])[:64]


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
    assert letter["payload_truncated"] is True


def test_a_deep_value_that_is_no_object_still_gets_its_letter(intake):
    routed = intake.route([_nested(1000, 1, "array")], FACTS)
    assert [r.reason for r in routed.rejections] == ["invalid:event"]
    assert json.loads(routed.dead_letters[0].value)["reason"] == "invalid:event"


def test_a_batch_over_the_limit_or_of_non_objects_is_refused_whole():
    page = {"type": "page", "anonymousId": "a"}
    assert Intake.batch_refusal([page] * 2500, 2500) is None
    assert Intake.batch_refusal([page, page, 1], 2500) is None
    too_many = Intake.batch_refusal([page] * 2501, 2500)
    assert (too_many.code, too_many.reason) == ("too_many_events", "batch:too_many_events")
    assert "2501" in too_many.detail and "2500" in too_many.detail
    garbage = Intake.batch_refusal([1] * 1000, 2500)
    assert (garbage.code, garbage.reason) == ("invalid_batch", "batch:not_objects")
    assert Intake.batch_refusal([page, 1, "x"], 2500).reason == "batch:not_objects"


def test_a_refused_batch_is_one_letter_holding_the_body(intake):
    body = json.dumps({"batch": [1] * 1000}).encode()
    refusal = Intake.batch_refusal([1] * 1000, 2500)
    letter = json.loads(intake.batch_letter(body, 1000, refusal, FACTS).value)
    assert letter["payload"].encode() == body
    assert (letter["payload_encoding"], letter["payload_truncated"]) == ("text", False)
    assert (letter["reason"], letter["events"], letter["source_id"]) == (
        "batch:not_objects",
        1000,
        "site",
    )


def test_a_refused_batch_letter_stays_under_the_record_limit(intake):
    # Escaped quotes double in the letter's text: base64 keeps it under the limit.
    body = ('{"batch": [1, "' + '\\"' * 240_000 + '"]}').encode()
    refusal = Intake.batch_refusal([1, "x"], 2500)
    record = intake.batch_letter(body, 2, refusal, FACTS)
    assert len(record.value) <= MAX_LETTER_BYTES
    letter = json.loads(record.value)
    assert letter["payload_encoding"] == "base64"
    assert base64.b64decode(letter["payload"]) == body
    invalid_utf8 = intake.batch_letter(b'{"batch": ["\xff"]}', 1, refusal, FACTS)
    assert json.loads(invalid_utf8.value)["payload_encoding"] == "base64"


def test_a_huge_event_gets_a_letter_kafka_takes(intake):
    # 1e9 is 3 bytes sent and 12 written (1000000000.0): a 500 KB event would make a 2 MB letter.
    routed = intake.route([{"type": "page", "anonymousId": "a", "n": [1e9] * 160_000}], FACTS)
    assert [r.reason for r in routed.rejections] == ["too_large"]
    assert len(routed.dead_letters[0].value) <= MAX_LETTER_BYTES
    assert json.loads(routed.dead_letters[0].value)["payload_truncated"] is True


# --- personal data: what reaches the log is anonymised --------------------------------

KEY = "k" * 32
RAW_IPS = ("198.51.100.23", "192.0.2.77", "2001:db8:aa:bb::9")


def _intake(**settings: object) -> Intake:
    from core.collector_settings import CollectorSettings
    from ingest.anonymise import Anonymiser

    contract = load_contract("web_events", 1)
    anonymiser = Anonymiser.for_contract(contract, CollectorSettings(**settings))
    return Intake(contract, compile_validator(contract), 2048, anonymiser=anonymiser)


def _no_raw_ip(*values: bytes) -> None:
    for value in values:
        for ip in RAW_IPS:
            assert ip.encode() not in value, (ip, value)


def test_ips_are_truncated_in_events_and_in_dead_letters(intake):
    facts = replace(FACTS, ip="198.51.100.23")  # the request's address
    events = [
        {"type": "page", "anonymousId": "a", "messageId": "1"},  # address filled in
        {"type": "page", "anonymousId": "a", "messageId": "2", "context": {"ip": "192.0.2.77"}},
        {"type": "page", "anonymousId": "a", "context": {"ip": "2001:db8:aa:bb::9"}},
        {"type": "page", "anonymousId": "a", "messageId": "4", "context": {"ip": "jane@x"}},
        {"type": "page", "messageId": "5", "context": {"ip": "192.0.2.77"}},  # no user
    ]
    routed = intake.route(events, facts)
    ips = [json.loads(r.value)["context"]["ip"] for r in routed.accepted]
    # Not an address: treated as absent, so the request's (truncated) address is filled in.
    assert ips == ["198.51.100.0", "192.0.2.0", "2001:db8:aa::", "198.51.100.0"]
    (letter,) = [json.loads(r.value) for r in routed.dead_letters]
    assert letter["payload"]["context"] == {"ip": "192.0.2.0"}
    _no_raw_ip(*(r.value for r in routed.accepted + routed.dead_letters))
    assert events[1]["context"]["ip"] == "192.0.2.77"  # the caller's events are untouched


def test_a_derived_event_id_is_computed_from_the_anonymised_event(intake):
    # A hash over the raw address would let anyone find it by trying all 2^32 of them.
    sent = {"type": "page", "anonymousId": "a", "timestamp": "2026-05-01T11:59:00Z"}
    ids = {
        json.loads(intake.route([{**sent, "context": {"ip": ip}}], FACTS).accepted[0].value)[
            "event_id"
        ]
        for ip in ("192.0.2.77", "192.0.2.78", "192.0.2.0")
    }
    assert len(ids) == 1


def test_the_hash_setting_writes_keyed_hashes():
    import hmac

    routed = _intake(ip_anonymisation="hash", hash_key=KEY).route(
        [
            {"type": "page", "anonymousId": "a", "context": {"ip": "192.0.2.77"}},
            {"type": "page", "context": {"ip": "::ffff:192.0.2.77"}},
        ],
        replace(FACTS, ip="198.51.100.23"),
    )
    expected = hmac.new(KEY.encode(), bytes([192, 0, 2, 77]), hashlib.sha256).hexdigest()
    assert json.loads(routed.accepted[0].value)["context"]["ip"] == expected
    assert json.loads(routed.dead_letters[0].value)["payload"]["context"]["ip"] == expected
    _no_raw_ip(routed.accepted[0].value, routed.dead_letters[0].value)


def test_the_keep_setting_keeps_addresses_but_drops_what_is_not_one():
    routed = _intake(ip_anonymisation="keep").route(
        [{"type": "page", "anonymousId": "a", "context": {"ip": ip}} for ip in ("192.0.2.77", "x")],
        replace(FACTS, ip="testclient"),
    )
    assert [json.loads(r.value)["context"] for r in routed.accepted] == [{"ip": "192.0.2.77"}, {}]


def test_a_refused_batch_letter_holds_the_body_anonymised(intake):
    value = {
        "batch": [{"type": "page", "context": {"ip": "192.0.2.77"}}, 1, 2],
        "context": {"ip": "2001:db8:aa:bb::9"},
    }
    body = json.dumps(value).encode()
    refusal = Intake.batch_refusal(value["batch"], 2500)
    letter = json.loads(intake.batch_letter(body, 3, refusal, FACTS, value).value)
    assert json.loads(letter["payload"]) == {
        "batch": [{"type": "page", "context": {"ip": "192.0.2.0"}}, 1, 2],
        "context": {"ip": "2001:db8:aa::"},
    }
    assert letter["payload_anonymised"] is True
    assert letter["payload_bytes"] == len(body)
    assert letter["payload_sha256"] == hashlib.sha256(letter["payload"].encode()).hexdigest()
    _no_raw_ip(json.dumps(letter).encode())
    clean = {"batch": [1, 2, {"type": "page"}]}
    kept = json.loads(intake.batch_letter(b"{...}", 3, refusal, FACTS, clean).value)
    assert (kept["payload"], kept["payload_anonymised"]) == ("{...}", False)


def test_a_refused_batch_letter_is_rewritten_whatever_its_calls_hold(intake):
    deep = {"type": "page", "properties": {"x": _nested(1000, 1)}}
    odd = {"type": "page", "name": "\ud800", "n": 2**70, "context": {"ip": "192.0.2.77"}}
    value = {"batch": [deep, odd, 1, 2]}
    refusal = Intake.batch_refusal(value["batch"], 2)
    letter = json.loads(intake.batch_letter(b"{...}", 4, refusal, FACTS, value).value)
    payload = json.loads(letter["payload"])
    assert payload["batch"][1] == {**odd, "name": "\ud800", "context": {"ip": "192.0.2.0"}}
    assert "<too deep>" in letter["payload"]


def test_a_suppressed_users_events_are_dropped_not_dead_lettered(intake):
    events = [
        {"type": "page", "anonymousId": "a", "messageId": "1"},
        {"type": "page", "anonymousId": "gone", "messageId": "2"},
        {"type": "track", "userId": "gone", "messageId": "3"},  # invalid: no event name
        {"type": "pageview", "anonymousId": "b"},
    ]
    routed = intake.route(
        events, FACTS, suppressed=lambda e: "gone" in (e.get("userId"), e.get("anonymousId"))
    )
    assert routed.suppressed == 2
    assert [json.loads(r.value)["event_id"] for r in routed.accepted] == ["1"]
    # Only the other user's invalid event is dead-lettered, still under its own index.
    assert [r.index for r in routed.rejections] == [3]
    assert len(routed.dead_letters) == 1 and b"gone" not in routed.dead_letters[0].value


def test_exactly_the_depth_limit_is_accepted_and_one_level_more_is_not(intake):
    at_limit = {"type": "page", "anonymousId": "a", "properties": {"x": _nested(62, 1, "array")}}
    beyond = {"type": "page", "anonymousId": "a", "properties": {"x": _nested(63, 1, "array")}}
    routed = intake.route([at_limit, beyond], FACTS)
    assert [(r.index, r.reason) for r in routed.rejections] == [(1, "invalid:too_deep")]


def test_nulls_are_dropped_wherever_the_walk_finds_them_and_kept_in_traits(intake):
    events = [
        {"type": "page", "anonymousId": "a", "userId": None, "context": {"page": {"x": None}}},
        {"type": "identify", "userId": "u", "traits": {"plan": None}, "context": {"a": [None]}},
        {"type": "page", "anonymousId": "a", "properties": {"path": "/p"}},
    ]
    routed = intake.route(events, FACTS)
    written = [json.loads(r.value) for r in routed.accepted]
    assert "userId" not in written[0] and written[0]["context"]["page"] == {}
    assert written[1]["traits"] == {"plan": None} and written[1]["context"]["a"] == [None]
    assert written[2]["properties"] == {"path": "/p"}
