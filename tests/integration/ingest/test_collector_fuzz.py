"""Random and malformed payloads never crash the collector or earn a 5xx."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.integration, pytest.mark.slow]

AUTH = ("test-write-key", "")
ENDPOINTS = ["track", "page", "screen", "identify", "alias", "group", "batch", "import"]

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
timestamps = st.one_of(
    st.datetimes().map(lambda d: d.isoformat() + "Z"), st.text(max_size=30), st.integers()
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


def _check(answer: httpx.Response, sent: object) -> None:
    assert answer.status_code in {200, 400, 401, 413}, (answer.status_code, answer.text, sent)
    body = answer.json()
    if answer.status_code == 200:
        assert body["success"] is True
        if isinstance(sent, dict) and isinstance(sent.get("batch"), list):
            assert body["accepted"] + len(body["rejected"]) == len(sent["batch"])
    else:
        assert body["message"]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(endpoint=st.sampled_from(ENDPOINTS), call=segment_calls)
def test_random_calls(collector, endpoint, call):
    payload = {"batch": [call, call]} if endpoint in {"batch", "import"} else call
    _check(httpx.post(f"{collector.url}/v1/{endpoint}", json=payload, auth=AUTH), payload)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(endpoint=st.sampled_from(ENDPOINTS), body=st.one_of(json_values, st.binary(max_size=200)))
def test_arbitrary_bodies(collector, endpoint, body):
    if isinstance(body, bytes):
        answer = httpx.post(f"{collector.url}/v1/{endpoint}", content=body, auth=AUTH)
    else:
        answer = httpx.post(f"{collector.url}/v1/{endpoint}", json=body, auth=AUTH)
    _check(answer, body)
