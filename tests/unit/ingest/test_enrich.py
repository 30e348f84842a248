from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.enrich import EnrichError, RequestFacts, enrich, format_ts, parse_ts

RECEIVED = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)


def facts(**overrides) -> RequestFacts:
    return RequestFacts(
        **({"received_at": RECEIVED, "source_id": "site", "contract_version": "1.0.0"} | overrides)
    )


def test_skew_is_corrected_as_segment_defines_it():
    # The client clock runs 1 hour fast; the event happened 3 s before sending.
    event = {"originalTimestamp": "2026-05-01T13:00:00.000Z", "sentAt": "2026-05-01T13:00:03Z"}
    out = enrich(event, facts())
    assert out["timestamp"] == format_ts(RECEIVED - timedelta(seconds=3))
    assert out["originalTimestamp"] == "2026-05-01T13:00:00.000Z"
    assert out["receivedAt"] == "2026-05-01T12:00:00.000Z"


def test_a_skew_beyond_the_calendar_is_refused_with_a_reason():
    # Found by the collector fuzz test: the corrected time would fall before year 1.
    event = {"originalTimestamp": "2000-01-01T00:00:00Z", "sentAt": "4026-01-01T00:00:00Z"}
    for historical in (False, True):
        with pytest.raises(EnrichError) as refused:
            enrich(event, facts(historical=historical))
        assert refused.value.reason == "invalid:timestamp_too_old"


def test_server_library_timestamp_and_batch_sent_at():
    event = {"timestamp": "2026-05-01T11:59:50+00:00"}
    out = enrich(event, facts(sent_at="2026-05-01T12:00:00Z"))
    assert out["timestamp"] == format_ts(RECEIVED - timedelta(seconds=10))


def test_without_client_times_the_receive_time_is_event_time():
    out = enrich({"anonymousId": "a"}, facts())
    assert out["timestamp"] == out["receivedAt"]


def test_message_id_is_kept_or_generated_and_becomes_event_id():
    assert enrich({"messageId": "m-1"}, facts())["event_id"] == "m-1"
    generated = enrich({}, facts())
    assert generated["event_id"] == generated["messageId"]
    assert generated["event_id"].startswith("gen-")


CLICK = {
    "type": "track",
    "event": "Element Clicked",
    "anonymousId": "a-1",
    "properties": {"target": "buy"},
    "timestamp": "2026-05-01T11:59:58Z",
}


def test_a_retry_without_message_id_gets_the_same_id():
    # Each attempt has its own receive time and sentAt; the event is the same.
    first = enrich({**CLICK, "sentAt": "2026-05-01T11:59:59Z"}, facts())
    retry = enrich(
        {**CLICK, "sentAt": "2026-05-01T12:00:09Z", "messageId": None},
        facts(received_at=RECEIVED + timedelta(seconds=10)),
    )
    assert first["event_id"] == retry["event_id"] == retry["messageId"]
    assert first["event_id"].startswith("gen-")


@pytest.mark.parametrize(
    ("change", "other_facts"),
    [
        ({}, {"source_id": "other-site"}),
        ({"anonymousId": "a-2"}, {}),
        ({"userId": "u-1"}, {}),
        ({"timestamp": "2026-05-01T11:59:57Z"}, {}),
        ({"properties": {"target": "cart"}}, {}),
        ({"type": "page"}, {}),
    ],
)
def test_derived_ids_differ_by_source_user_time_and_payload(change, other_facts):
    assert (
        enrich({**CLICK, **change}, facts(**other_facts))["event_id"]
        != (enrich(CLICK, facts())["event_id"])
    )


def test_events_without_any_client_time_are_never_merged():
    untimed = {"type": "track", "event": "Ping", "userId": "u"}
    ids = {enrich(untimed, facts(), position=i)["event_id"] for i in range(3)}
    ids.add(enrich(untimed, facts(received_at=RECEIVED + timedelta(seconds=1)))["event_id"])
    assert len(ids) == 4


def test_provenance_and_endpoint_type():
    out = enrich({"anonymousId": "a"}, facts(call_type="page", ip="10.0.0.1"))
    assert (out["type"], out["source_id"], out["contract_version"]) == ("page", "site", "1.0.0")
    assert out["context"] == {"ip": "10.0.0.1"}
    kept = enrich({"context": {"ip": "1.2.3.4"}}, facts(ip="10.0.0.1"))
    assert kept["context"]["ip"] == "1.2.3.4"


def test_type_contradicting_the_endpoint_is_refused():
    with pytest.raises(EnrichError, match="/v1/page") as info:
        enrich({"type": "track"}, facts(call_type="page"))
    assert info.value.reason == "invalid:type"


@pytest.mark.parametrize("value", ["yesterday", "", 17, "2026-13-01T00:00:00Z"])
def test_unparseable_timestamps_are_refused_with_the_field(value):
    with pytest.raises(EnrichError) as info:
        enrich({"timestamp": value}, facts())
    assert info.value.reason == "invalid:timestamp"


def test_naive_timestamps_are_utc():
    assert parse_ts("2026-05-01T12:00:00", "t") == RECEIVED


def test_null_fields_are_absent_but_traits_are_kept():
    out = enrich(
        {
            "userId": None,
            "anonymousId": "a",
            "properties": {"title": None, "path": "/"},
            "traits": {"plan": None},
        },
        facts(),
    )
    assert "userId" not in out
    assert out["properties"] == {"path": "/"}
    assert out["traits"] == {"plan": None}
