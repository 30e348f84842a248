"""The collector's event-time rule at its boundaries (``core.event_time``, ``ingest.enrich``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.event_time import CLAMPED_FUTURE, EventTimeBounds
from core.settings import Settings
from data_contracts import load_contract
from data_contracts.derive import compile_validator
from ingest.enrich import EnrichError, RequestFacts, enrich_with_adjustment, format_ts, parse_ts
from ingest.intake import Intake

RECEIVED = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
BOUNDS = EventTimeBounds(
    future_tolerance=timedelta(seconds=60),
    live_max_age=timedelta(days=7),
    import_max_age=timedelta(days=3653),
)


def facts(**overrides) -> RequestFacts:
    base = {"received_at": RECEIVED, "source_id": "site", "contract_version": "1.0.0"}
    return RequestFacts(**(base | {"bounds": BOUNDS} | overrides))


def timed(timestamp: str | None, sent_at: str | None = None, **overrides):
    event = {"anonymousId": "a", "timestamp": timestamp}
    if sent_at is not None:
        event["sentAt"] = sent_at
    return enrich_with_adjustment(event, facts(**overrides))


def test_exactly_at_the_tolerance_the_client_time_is_kept():
    out, adjustment = timed("2026-05-01T12:01:00.000Z")
    assert (out["timestamp"], adjustment) == ("2026-05-01T12:01:00.000Z", None)


def test_one_millisecond_past_the_tolerance_is_clamped_and_the_client_value_kept():
    out, adjustment = timed("2026-05-01T12:01:00.001Z")
    assert out["timestamp"] == out["receivedAt"] == "2026-05-01T12:00:00.000Z"
    assert out["originalTimestamp"] == "2026-05-01T12:01:00.001Z"
    assert adjustment == CLAMPED_FUTURE


def test_the_bound_applies_after_the_skew_correction():
    # A phone an hour fast, sending 3 s after the event: corrected, not clamped.
    out, adjustment = timed("2026-05-01T13:00:00Z", "2026-05-01T13:00:03Z")
    assert (out["timestamp"], adjustment) == ("2026-05-01T11:59:57.000Z", None)
    # The event lies 2 minutes after its own sentAt: clamped.
    out, adjustment = timed("2026-05-01T13:02:00Z", "2026-05-01T13:00:00Z")
    assert (out["timestamp"], adjustment) == ("2026-05-01T12:00:00.000Z", CLAMPED_FUTURE)


@pytest.mark.parametrize(
    "timestamp",
    ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59-05:00", "9999-12-31T23:59:59.999999+14:00"],
)
def test_dates_at_the_end_of_the_calendar_are_clamped_without_overflow(timestamp):
    out, adjustment = timed(timestamp)
    assert (out["timestamp"], adjustment) == ("2026-05-01T12:00:00.000Z", CLAMPED_FUTURE)
    assert out["originalTimestamp"] == timestamp


@pytest.mark.parametrize("historical", [False, True])
@pytest.mark.parametrize("timestamp", ["0001-01-01T00:00:00Z", "0001-01-01T00:00:00+05:00"])
def test_dates_at_the_start_of_the_calendar_are_too_old_everywhere(timestamp, historical):
    with pytest.raises(EnrichError) as refused:
        timed(timestamp, historical=historical)
    assert refused.value.reason == "invalid:timestamp_too_old"


def test_a_sent_at_far_in_the_future_makes_the_event_too_old():
    with pytest.raises(EnrichError) as refused:
        timed("2026-05-01T12:00:00Z", "9999-12-31T23:59:59Z")
    assert refused.value.reason == "invalid:timestamp_too_old"
    assert "sentAt 9999-12-31" in refused.value.detail


def test_the_live_horizon_and_historical_import():
    at_limit = format_ts(RECEIVED - timedelta(days=7))
    assert timed(at_limit)[0]["timestamp"] == at_limit
    past = format_ts(RECEIVED - timedelta(days=7, milliseconds=1))
    with pytest.raises(EnrichError, match="/v1/import") as refused:
        timed(past)
    assert refused.value.reason == "invalid:timestamp_too_old"
    assert timed(past, historical=True)[0]["timestamp"] == past
    with pytest.raises(EnrichError, match="3653 days"):
        timed(format_ts(RECEIVED - timedelta(days=3654)), historical=True)


def test_without_a_live_horizon_only_the_calendar_limits_the_past():
    unlimited = EventTimeBounds(live_max_age=None)
    assert timed("1970-01-01T00:00:00Z", bounds=unlimited)[0]["timestamp"].startswith("1970")
    with pytest.raises(EnrichError, match="year 1"):
        timed("0001-01-01T00:00:00Z", "9999-01-01T00:00:00Z", bounds=unlimited)


def test_leap_seconds_are_read_as_the_last_second_of_the_minute():
    assert parse_ts("2026-04-30T23:59:60Z", "t") == datetime(2026, 4, 30, 23, 59, 59, tzinfo=UTC)
    out, _ = timed("2026-05-01T11:59:60.250Z")
    assert out["timestamp"] == "2026-05-01T11:59:59.250Z"


@pytest.mark.parametrize(
    "timestamp",
    ["2026-05-01T17:30:00+05:30", "2026-05-01T04:00:00-08:00", "2026-05-01T13:00:00+0100"],
)
def test_offsets_other_than_z_are_converted_to_utc(timestamp):
    assert timed(timestamp)[0]["timestamp"] == "2026-05-01T12:00:00.000Z"


def test_a_null_original_timestamp_does_not_hide_timestamp():
    event = {"anonymousId": "a", "originalTimestamp": None, "timestamp": "2026-05-01T11:00:00Z"}
    out, _ = enrich_with_adjustment(event, facts())
    assert out["timestamp"] == "2026-05-01T11:00:00.000Z"
    assert out["originalTimestamp"] == "2026-05-01T11:00:00Z"


def test_bounds_from_settings_default_to_the_topic_retention():
    assert EventTimeBounds.from_settings(Settings()).live_max_age == timedelta(days=7)
    tuned = Settings(event_time={"max_age_s": 3600, "future_tolerance_s": 5})
    bounds = EventTimeBounds.from_settings(tuned)
    assert (bounds.live_max_age, bounds.future_tolerance) == (
        timedelta(hours=1),
        timedelta(seconds=5),
    )
    assert EventTimeBounds.from_settings(Settings(kafka={"retention_ms": -1})).live_max_age is None


def test_a_clamped_event_carries_the_adjustment_header():
    contract = load_contract("web_events", 1)
    intake = Intake(contract, compile_validator(contract), max_event_bytes=4096)
    events = [
        {"type": "page", "anonymousId": "a", "timestamp": "9999-12-31T23:59:59Z"},
        {"type": "page", "anonymousId": "a", "timestamp": "2026-05-01T11:59:00Z"},
        {"type": "page", "anonymousId": "a", "timestamp": "2020-01-01T00:00:00Z"},
    ]
    routed = intake.route(events, facts())
    assert routed.clamped == 1
    assert [r.reason for r in routed.rejections] == ["invalid:timestamp_too_old"]
    clamped, plain = routed.accepted
    assert ("timestamp_adjusted", CLAMPED_FUTURE.encode()) in clamped.headers
    assert all(name != "timestamp_adjusted" for name, _ in plain.headers)
    assert json.loads(clamped.value)["timestamp"] == "2026-05-01T12:00:00.000Z"


_moments = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
_offsets = st.sampled_from(["Z", "+00:00", "-05:00", "+14:00", "-12:00", "+05:30"])


@settings(max_examples=400, deadline=None)
@given(
    timestamp=st.one_of(st.none(), st.tuples(_moments, _offsets)),
    sent_at=st.one_of(st.none(), st.tuples(_moments, _offsets)),
    historical=st.booleans(),
)
def test_no_client_time_leaves_the_bounds_or_raises_anything_but_a_reason(
    timestamp, sent_at, historical
):
    def text(pair):
        return None if pair is None else pair[0].replace(tzinfo=None).isoformat() + pair[1]

    try:
        out, _ = timed(text(timestamp), text(sent_at), historical=historical)
    except EnrichError as refused:
        assert refused.reason in {"invalid:timestamp", "invalid:timestamp_too_old"}
        return
    moment = parse_ts(out["timestamp"], "timestamp")
    oldest = RECEIVED - BOUNDS.max_age(historical)
    assert oldest <= moment <= RECEIVED + BOUNDS.future_tolerance
