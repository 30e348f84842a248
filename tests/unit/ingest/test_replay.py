"""Replaying dead letters, the pure part: reasons, letters back into requests, the report."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from core.event_time import EventTimeBounds
from core.suppressions import Suppressions
from data_contracts import load_contract
from data_contracts.derive import compile_validator
from ingest.__main__ import main
from ingest.enrich import RequestFacts
from ingest.intake import Intake, Record
from ingest.replay import (
    REPLAYED_FROM,
    Coordinates,
    DeadLetter,
    ReasonFilter,
    Replayer,
    ReplayReport,
    ReplayRequest,
)

RECEIVED = datetime(2026, 5, 1, 12, tzinfo=UTC)
STRICT = EventTimeBounds(live_max_age=timedelta(hours=1))
LENIENT = EventTimeBounds(live_max_age=timedelta(days=1))
AT = Coordinates("web.events.dlq", 2, 41)


@pytest.fixture(scope="module")
def intake() -> Intake:
    contract = load_contract("web_events", 1)
    return Intake(contract, compile_validator(contract), max_event_bytes=2048)


def _facts(bounds: EventTimeBounds = STRICT, **overrides) -> RequestFacts:
    base = {"received_at": RECEIVED, "source_id": "site", "contract_version": "1.0.0"}
    return RequestFacts(**(base | {"bounds": bounds, "ip": "203.0.113.9"} | overrides))


def _letter(intake: Intake, event, facts: RequestFacts, at: Coordinates = AT) -> DeadLetter:
    """The letter the collector writes for ``event`` (the last of a request of three)."""
    routed = intake.route([event], facts, first_index=2)
    (record,) = routed.dead_letters
    return DeadLetter.parse(record.value, at, record.headers)


def _replayer(intake: Intake, reasons: list[str], replayed=frozenset(), bounds=LENIENT):
    request = ReplayRequest(ReasonFilter.parse(reasons), RECEIVED - timedelta(days=1))
    report = ReplayReport("web.events.dlq", "web.events.v1", request)
    return Replayer(intake, bounds, report, replayed), report


def _page(minutes_old: float, **fields) -> dict:
    moment = RECEIVED - timedelta(minutes=minutes_old)
    return {"type": "page", "anonymousId": "a-1", "timestamp": moment.isoformat(), **fields}


@pytest.mark.parametrize(
    ("pattern", "matched", "not_matched"),
    [
        ("invalid:timestamp_too_old", ["invalid:timestamp_too_old"], ["invalid:timestamp"]),
        ("invalid:", ["invalid:event", "invalid:timestamp"], ["rule:identity", "too_large"]),
        ("invalid:*", ["invalid:event"], ["missing:anonymousId"]),
        ("invalid:timestamp*", ["invalid:timestamp", "invalid:timestamp_too_old"], ["invalid:x"]),
        ("too_large", ["too_large"], ["invalid:too_deep"]),
        ("rule:identity", ["rule:identity"], ["rule:identity_x", "rule:"]),
    ],
)
def test_a_reason_is_exact_a_family_or_a_prefix(pattern, matched, not_matched):
    reasons = ReasonFilter.parse([pattern])
    assert [r for r in matched + not_matched if reasons.matches(r)] == matched


def test_several_reasons_match_any_of_them():
    reasons = ReasonFilter.parse(["too_large", "rule:"])
    assert reasons.matches("too_large") and reasons.matches("rule:identity")
    assert not reasons.matches("invalid:event")
    assert reasons.patterns == ("too_large", "rule:")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("timestamp_too_old", "unknown reason format"),
        ("foo:bar", "unknown reason format"),
        ("invalid:a b", "unknown reason format"),
        ("invalid:*x", "unknown reason format"),
        ("", "unknown reason format"),
        ("invalid", "names a family only; write invalid:"),
        ("too_large:x", "too_large has no detail"),
    ],
)
def test_a_reason_of_unknown_format_is_refused_with_what_to_write(pattern, message):
    with pytest.raises(ValueError, match=message):
        ReasonFilter.parse([pattern])


def test_the_time_range_must_not_be_empty():
    reasons = ReasonFilter.parse(["invalid:"])
    with pytest.raises(ValueError, match="is not before --until"):
        ReplayRequest(reasons, RECEIVED, RECEIVED - timedelta(seconds=1))
    with pytest.raises(ValueError, match="is not before --until"):
        ReplayRequest(reasons, RECEIVED, RECEIVED)
    with pytest.raises(ValueError, match="no time zone"):
        ReplayRequest(reasons, datetime(2026, 5, 1))
    assert ReplayRequest(reasons, RECEIVED).until is None


def test_a_letter_holds_the_request_its_event_came_in(intake):
    facts = _facts(call_type="page", sent_at="2026-05-01T11:59:59Z", historical=True)
    letter = _letter(intake, {"anonymousId": "a", "type": "page", "userId": 7}, facts)
    assert (letter.at, letter.reason, letter.unreplayable) == (AT, "invalid:userId", None)
    assert "userId" in letter.detail
    assert letter.index == 2
    # The same request back, with today's event-time bounds (the address as anonymised).
    assert letter.facts(LENIENT, "1.0.0") == replace(facts, bounds=LENIENT, ip="203.0.113.0")


def test_a_letter_without_request_facts_replays_as_a_batch_call():
    # Written before letters carried ``request``; one that said ``errors`` reads the same.
    old = {
        "payload": {"type": "page", "anonymousId": "a"},
        "reason": "rule:identity",
        "errors": ["Every event names its user"],
        "contract": "web-events/1.0.0",
        "received_at": "2026-05-01T12:00:00.000Z",
        "source_id": "site",
    }
    letter = DeadLetter.parse(json.dumps(old).encode(), AT)
    assert (letter.detail, letter.index, letter.unreplayable) == (
        "Every event names its user",
        0,
        None,
    )
    facts = letter.facts(LENIENT, "1.0.0")
    assert (facts.call_type, facts.sent_at, facts.ip, facts.historical) == (
        None,
        None,
        None,
        False,
    )


def test_letters_that_hold_no_event_as_sent_are_not_replayable(intake):
    huge = intake.route([{"type": "page", "anonymousId": "a", "n": [1e9] * 160_000}], _facts())
    nested: list = []
    for _ in range(300):  # deeper than the log's JSON encoder goes: the letter is pruned
        nested = [nested]
    deep = {"type": "page", "anonymousId": "a", "p": nested}
    too_deep = intake.route([deep], _facts())
    refusal = Intake.batch_refusal([1, 1], 2500)
    batch = intake.batch_letter(b'{"batch": [1, 1]}', 2, refusal, _facts())
    no_facts = json.dumps({"payload": {}, "reason": "rule:identity"}).encode()
    cases = {
        "payload_truncated": [huge.dead_letters[0], too_deep.dead_letters[0]],
        "batch_refused_whole": [batch],
        "no_request_facts": [Record(None, no_facts, [])],
        "unreadable": [Record(None, b"\xff{", [("reason", b"rule:identity")])],
    }
    for why, records in cases.items():
        for record in records:
            letter = DeadLetter.parse(record.value, AT, record.headers)
            assert letter.unreplayable == why, (why, letter.reason)
    assert json.loads(too_deep.dead_letters[0].value)["payload_truncated"] is True
    assert DeadLetter.parse(b"\xff{", AT, [("reason", b"rule:x")]).reason == "rule:x"


def test_an_event_now_valid_becomes_the_record_the_collector_would_now_write(intake):
    # Sent a minute before it arrived, two hours after it happened: 119 minutes old.
    event = _page(120, messageId="m-1", sentAt=(RECEIVED - timedelta(minutes=1)).isoformat())
    letter = _letter(intake, event, _facts(STRICT))
    assert letter.reason == "invalid:timestamp_too_old"
    replayer, report = _replayer(intake, ["invalid:timestamp_too_old"])

    record = replayer.consider(letter)

    # Validated and stamped by today's contract, whichever version refused it.
    now = _facts(LENIENT, contract_version=intake.contract.version)
    (expected,) = intake.route([event], now, first_index=2).accepted
    assert (record.key, record.value) == (expected.key, expected.value)
    assert record.headers == [*expected.headers, (REPLAYED_FROM, b"web.events.dlq/2/41")]
    value = json.loads(record.value)
    assert value["receivedAt"] == "2026-05-01T12:00:00.000Z"  # the original request's
    assert value["timestamp"] == "2026-05-01T10:01:00.000Z"  # corrected by the event's sentAt
    assert value["context"]["ip"] == "203.0.113.0"  # anonymised once, as the collector does
    assert (report.read, report.matched, report.now_valid) == (1, 1, 1)


def test_an_event_without_ids_gets_the_id_the_collector_gave_it(intake):
    # No messageId, no client time: the id takes receivedAt and the index in the request.
    event = {"type": "page", "properties": {"path": "/"}}
    letter = _letter(intake, event, _facts())
    letter = DeadLetter(
        letter.at,
        letter.reason,
        letter.detail,
        {**event, "anonymousId": "fixed-later"},
        letter.received_at,
        letter.source_id,
        letter.request,
    )
    replayer, _ = _replayer(intake, ["rule:identity"])
    record = replayer.consider(letter)
    (direct,) = intake.route([letter.payload], _facts(), first_index=2).accepted
    assert json.loads(record.value)["event_id"] == json.loads(direct.value)["event_id"]
    (elsewhere,) = intake.route([letter.payload], _facts(), first_index=0).accepted
    assert json.loads(record.value)["event_id"] != json.loads(elsewhere.value)["event_id"]


def test_the_report_counts_each_letter_once_by_what_became_of_it(intake):
    strict = _facts(STRICT)
    letters = [
        _letter(intake, _page(120, messageId="ok"), strict, Coordinates("dlq", 0, 1)),
        _letter(intake, _page(120, messageId="done"), strict, Coordinates("dlq", 0, 2)),
        _letter(intake, _page(3 * 24 * 60, messageId="old"), strict, Coordinates("dlq", 0, 3)),
        _letter(intake, _page(120, userId=5), strict, Coordinates("dlq", 1, 1)),
        _letter(intake, {"type": "page"}, strict, Coordinates("dlq", 1, 2)),
    ]
    replayer, report = _replayer(intake, ["invalid:timestamp*"], replayed={b"dlq/0/2"})

    produced = [replayer.consider(letter) for letter in letters]

    assert [r is not None for r in produced] == [True, False, False, False, False]
    assert report.as_dict() == {
        "dead_letter_topic": "web.events.dlq",
        "events_topic": "web.events.v1",
        "reasons": ["invalid:timestamp*"],
        "since": "2026-04-30T12:00:00.000Z",
        "until": None,
        "dry_run": False,
        "read": 5,
        "matched": 4,
        "already_replayed": 1,
        "suppressed": 0,
        "now_valid": 1,
        "produced": 0,
        "still_invalid": {"invalid:timestamp_too_old": 1, "invalid:userId": 1},
        "not_replayable": {},
    }


def test_a_forgotten_user_s_letters_are_counted_and_never_routed_again(intake):
    strict = _facts(STRICT)
    letters = [
        _letter(intake, _page(120, anonymousId="gone-a"), strict, Coordinates("dlq", 0, 1)),
        _letter(intake, _page(120, userId="gone-u"), strict, Coordinates("dlq", 0, 2)),
        _letter(intake, _page(120, messageId="kept"), strict, Coordinates("dlq", 0, 3)),
        # forgotten in another pipeline only: replayed into this one
        _letter(intake, _page(120, userId="kept-u"), strict, Coordinates("dlq", 0, 4)),
    ]
    request = ReplayRequest(ReasonFilter.parse(["invalid:"]), RECEIVED - timedelta(days=1))
    report = ReplayReport("web.events.dlq", "web.events.v1", request)
    forgotten = {"gone-a", "gone-u"}
    suppressions = Suppressions(everywhere=set(forgotten), scoped={"checkouts": {"kept-u"}})
    replayer = Replayer(intake, LENIENT, report, suppressed=suppressions)

    produced = [replayer.consider(letter) for letter in letters]

    assert [r is not None for r in produced] == [False, False, True, True]
    assert (report.matched, report.suppressed, report.now_valid) == (4, 2, 2)
    assert not any(user in json.dumps(report.as_dict()) for user in forgotten)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reason", "nope", "--since", "2026-05-01T00:00:00Z"], "unknown reason format 'nope'"),
        (["--reason", "invalid:", "--since", "yesterday"], "'yesterday' is not an ISO-8601"),
        (
            ["--reason", "invalid:", "--since", "2026-05-02", "--until", "2026-05-01T00:00Z"],
            "--since 2026-05-02T00:00:00.000Z is not before --until 2026-05-01T00:00:00.000Z",
        ),
        (["--since", "2026-05-01T00:00:00Z"], "the following arguments are required: --reason"),
        (["--reason", "invalid:"], "the following arguments are required: --since"),
    ],
)
def test_bad_arguments_exit_2_before_kafka_and_say_what_was_wrong(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["replay-dead-letters", *argv])
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_letter_replays_into_its_source_s_pipeline_and_one_whose_source_left_does_not(intake):
    """With several collector pipelines, a letter goes where the collector would send its
    source's events now; a source without a pipeline (its write key removed) is reported."""
    from ingest.routes import Route

    event = _page(120, messageId="m-9", sentAt=(RECEIVED - timedelta(minutes=1)).isoformat())
    routes = {"site": Route("mobile_app", "app.mobile.v1", intake, default=False)}
    request = ReplayRequest(ReasonFilter.parse(["invalid:timestamp_too_old"]), RECEIVED)
    report = ReplayReport("web.events.dlq", "web.events.v1", request)
    replayer = Replayer(intake, LENIENT, report, routes=routes)

    record = replayer.consider(_letter(intake, event, _facts(STRICT)))
    assert record is not None and replayer.topic == "app.mobile.v1"

    gone = _letter(intake, event, _facts(STRICT, source_id="retired"), Coordinates("d", 0, 7))
    assert replayer.consider(gone) is None
    assert report.not_replayable == {"source_without_pipeline": 1}
    assert report.now_valid == 1
