"""Random and malformed payloads never crash the collector or earn a 5xx, and no event the
collector accepts carries an event time outside the bounds of ``core.event_time``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.event_time import EventTimeBounds

pytestmark = [pytest.mark.integration, pytest.mark.slow]

AUTH = ("test-write-key-0001", "")
ENDPOINTS = ["track", "page", "screen", "identify", "alias", "group", "batch", "import"]
LIVE_ENDPOINTS = [e for e in ENDPOINTS if e != "import"]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
_NOW = datetime.now(UTC)
timestamps = st.one_of(
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    # Around now: inside, at and past the bounds (days back, a minute or a day ahead).
    st.integers(-12 * 86400, 2 * 86400).map(
        lambda s: (_NOW + timedelta(seconds=s)).isoformat().replace("+00:00", "Z")
    ),
    # Any offset, the calendar's ends and leap seconds.
    st.builds(
        lambda d, minutes: d.replace(tzinfo=timezone(timedelta(minutes=minutes))).isoformat(),
        st.datetimes(),
        st.integers(-23 * 60 - 59, 23 * 60 + 59),
    ),
    st.sampled_from(["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-23:59"]),
    st.datetimes().map(lambda d: d.strftime("%Y-%m-%dT23:59:60Z")),
    st.text(max_size=30),
    st.integers(),
)
segment_calls = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["track", "page", "screen", "identify", "alias", "group", "x"]),
        "messageId": st.one_of(st.text(max_size=40), st.integers(), st.none()),
        "anonymousId": st.one_of(st.text(max_size=40), st.integers(), st.none()),
        "userId": st.one_of(st.text(max_size=40), st.none()),
        "event": json_values,
        "properties": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "path": json_values,
                    "load_time_ms": st.one_of(
                        st.floats(allow_nan=False, allow_infinity=False),
                        st.integers(),
                        st.text(max_size=5),
                    ),
                    "results_count": st.one_of(st.integers(), st.text(max_size=5)),
                },
            ),
        ),
        "context": json_values,
        "timestamp": timestamps,
        "originalTimestamp": timestamps,
        "sentAt": timestamps,
    },
)


# Calls a library would send, but with any client times: most are accepted, so the
# event-time bounds are checked on many records, not only on the rare random valid call.
plausible_calls = st.builds(
    lambda kind, user, times: {
        "type": kind,
        "anonymousId": user,
        "event": "Element Clicked",
        "properties": {"path": "/fuzz"},
        **times,
    },
    st.sampled_from(["track", "page"]),
    st.text(min_size=1, max_size=12),
    st.fixed_dictionaries(
        {},
        optional={"timestamp": timestamps, "originalTimestamp": timestamps, "sentAt": timestamps},
    ),
)


def _check(answer: httpx.Response, sent: object) -> None:
    assert answer.status_code in {200, 400, 401, 413}, (answer.status_code, answer.text, sent)
    body = answer.json()
    if answer.status_code == 200:
        assert body["success"] is True
        if isinstance(sent, dict) and isinstance(sent.get("batch"), list):
            assert body["accepted"] + len(body["rejected"]) == len(sent["batch"])
    else:
        assert body["message"]


def _post_random_calls(collector, endpoints: list[str], examples: int) -> int:
    """Post random calls to ``endpoints``; the number of events the collector accepted."""
    accepted = []

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(endpoint=st.sampled_from(endpoints), call=st.one_of(segment_calls, plausible_calls))
    def post(endpoint, call):
        payload = {"batch": [call, call]} if endpoint in {"batch", "import"} else call
        answer = httpx.post(f"{collector.url}/v1/{endpoint}", json=payload, auth=AUTH)
        _check(answer, payload)
        if answer.status_code == 200:
            accepted.append(answer.json()["accepted"])

    post()
    return sum(accepted)


def _check_event_times(collector, consume, accepted: int, max_age: timedelta | None) -> None:
    """Every accepted record: receivedAt - max_age <= timestamp <= receivedAt + tolerance."""
    bounds = EventTimeBounds.from_settings(collector.settings)
    assert accepted > 0, "no call was accepted: the bounds were not checked"
    records = consume(collector.settings, collector.settings.kafka.events_topic, accepted)
    assert len(records) == accepted
    for record in records:
        event = json.loads(record.value())
        received = datetime.fromisoformat(event["receivedAt"])
        moment = datetime.fromisoformat(event["timestamp"])
        assert not bounds.is_ahead(moment, received), event
        assert max_age is None or received - moment <= max_age, event


def test_random_calls(collector, consume):
    accepted = _post_random_calls(collector, LIVE_ENDPOINTS, 120)
    live = EventTimeBounds.from_settings(collector.settings).max_age(historical=False)
    _check_event_times(collector, consume, accepted, live)


def test_random_imports(collector, consume):
    accepted = _post_random_calls(collector, ["import"], 40)
    horizon = EventTimeBounds.from_settings(collector.settings).max_age(historical=True)
    _check_event_times(collector, consume, accepted, horizon)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(endpoint=st.sampled_from(ENDPOINTS), body=st.one_of(json_values, st.binary(max_size=200)))
def test_arbitrary_bodies(collector, endpoint, body):
    if isinstance(body, bytes):
        answer = httpx.post(f"{collector.url}/v1/{endpoint}", content=body, auth=AUTH)
    else:
        answer = httpx.post(f"{collector.url}/v1/{endpoint}", json=body, auth=AUTH)
    _check(answer, body)
