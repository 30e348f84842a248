from __future__ import annotations

import base64
import io
import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from ingest.simulator import (
    SendError,
    SimulatorConfig,
    build_truth,
    corrected_time,
    generate,
    minute_key,
    parse_ts,
    send,
)
from ingest.simulator.send import _retry_after


def _delivered(collector):
    """(receivedAt, event) for every event the stand-in received."""
    return [(r.received_at, e) for r in collector.requests for e in r.body["batch"]]


def test_batches_auth_and_answers(collector):
    events = generate(SimulatorConfig(seed=1, events=250, invalid_rate=0.1))
    report = send(events, collector.url, "key-1", None, 100, progress=False)
    assert [len(r.body["batch"]) for r in collector.requests] == [100, 100, 50]
    request = collector.requests[0]
    assert request.path == "/v1/import"  # replay mode: historical times
    assert request.headers["Authorization"] == "Basic " + base64.b64encode(b"key-1:").decode()
    assert ISO(request.body["sentAt"])
    not_objects = sum(1 for e in events if not isinstance(e.payload, dict))
    assert [r.status for r in report.requests] == [200, 200, 200]
    assert (report.sent, report.accepted, report.rejected) == (250, 250 - not_objects, not_objects)
    assert report.rejected_by_reason == ({"invalid:event": not_objects} if not_objects else {})
    sent_ids = [e.get("messageId") for _, e in _delivered(collector) if isinstance(e, dict)]
    assert sent_ids == [e.message_id for e in events if isinstance(e.payload, dict)]


def ISO(text: str) -> bool:
    return parse_ts(text).tzinfo is not None and text.endswith("Z")


def test_replay_mode_correction_gives_the_simulated_time(collector):
    config = SimulatorConfig(seed=2, events=400, skewed_client_rate=0.5, late_rate=0.1)
    events = generate(config)
    send(events, collector.url, "k", None, 50, progress=False)
    received = _delivered(collector)
    assert len(received) == len(events)
    skewed = 0
    for (received_at, wire), event in zip(received, events, strict=True):
        corrected = corrected_time(
            received_at, parse_ts(wire["sentAt"]), parse_ts(wire["originalTimestamp"])
        )
        # Exact up to the latency between stamping sentAt and receiving the request.
        assert timedelta(0) <= corrected - event.time < timedelta(seconds=1)
        assert wire["originalTimestamp"] == event.payload["originalTimestamp"]
        skewed += bool(event.skew)
    assert skewed > 50


def test_live_mode_anchors_at_now_and_truth_follows(collector):
    config = SimulatorConfig(seed=3, events=300, rate=1000, late_rate=0.1, late_by_s=300)
    events = generate(config)
    before = datetime.now(UTC)
    report = send(events, collector.url, "k", 1000, 50, progress=False, time_mode="live")
    shifted = report.events
    assert {r.path for r in collector.requests} == {"/v1/batch"}  # live times
    assert report.shift > timedelta(days=300)
    for (received_at, wire), event in zip(_delivered(collector), shifted, strict=True):
        corrected = corrected_time(
            received_at, parse_ts(wire["sentAt"]), parse_ts(wire["originalTimestamp"])
        )
        assert timedelta(0) <= corrected - event.time < timedelta(seconds=1)
    on_time = [e for e in shifted if e.sent_at - e.time < timedelta(seconds=5)]
    assert all(abs(e.time - before) < timedelta(seconds=10) for e in on_time)
    late = [e for e in shifted if e not in on_time]
    assert late and all(e.time < before - timedelta(seconds=290) for e in late)
    truth = build_truth(shifted)
    assert set(truth.events_per_minute) == {minute_key(e.time) for e in shifted}
    now_minutes = {minute_key(before + timedelta(seconds=s)) for s in range(11)}
    assert {minute_key(e.time) for e in on_time} <= now_minutes
    assert sum(truth.events_per_minute.values()) == 300


def test_paces_to_the_target_rate(collector):
    events = generate(SimulatorConfig(seed=4, events=400))
    started = time.monotonic()
    report = send(events, collector.url, "k", 2000, 50, progress=False)
    # The last of 8 batches may not leave before 350 events / 2000 per second.
    assert time.monotonic() - started >= 350 / 2000
    assert report.sent == 400


def test_retry_honours_retry_after_and_restamps_sent_at(collector):
    collector.script = [(503, {"Retry-After": "2"}), (429, {"Retry-After": "1"})]
    clock = iter(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=s) for s in range(100))
    sleeps: list[float] = []
    events = generate(SimulatorConfig(seed=5, events=10))
    report = send(
        events, collector.url, "k", None, 10, progress=False,
        now=lambda: next(clock), sleep=sleeps.append,
    )  # fmt: skip
    assert sleeps == [2.0, 1.0]
    assert [(r.status, r.attempts) for r in report.requests] == [(200, 3)]
    bodies = [r.body for r in collector.requests]
    assert len(bodies) == 3
    assert [b["sentAt"] for b in bodies] == [
        "2025-01-01T00:00:00.000Z",
        "2025-01-01T00:00:01.000Z",
        "2025-01-01T00:00:02.000Z",
    ]
    assert {e["messageId"] for e in bodies[0]["batch"]} == {
        e["messageId"] for e in bodies[2]["batch"]
    }


def test_retries_are_bounded(collector):
    collector.script = [(503, {"Retry-After": "0"})] * 10
    events = generate(SimulatorConfig(seed=6, events=30))
    with pytest.raises(SendError, match="still 503 after 3 attempts") as failure:
        send(
            events,
            collector.url,
            "k",
            None,
            10,
            progress=False,
            max_retries=2,
            sleep=lambda s: None,
        )
    assert len(collector.requests) == 3
    assert [(r.status, r.attempts) for r in failure.value.report.requests] == [(503, 3)]
    assert failure.value.report.sent == 0


def test_refusal_is_not_retried(collector):
    collector.script = [(401, {})]
    events = generate(SimulatorConfig(seed=6, events=10))
    with pytest.raises(SendError, match="check the write key"):
        send(events, collector.url, "wrong", None, 10, progress=False)
    assert len(collector.requests) == 1


def test_retry_after_header_forms():
    moment = datetime(2015, 10, 21, 7, 27, 0, tzinfo=UTC)
    assert _retry_after("5", moment) == 5.0
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT", moment) == 60.0
    assert _retry_after("soon", moment) is None
    assert _retry_after(None, moment) is None


def test_progress_lines(collector):
    stream = io.StringIO()
    events = generate(SimulatorConfig(seed=7, events=120))
    send(events, collector.url, "k", None, 50, progress_every_s=0.0, progress_stream=stream)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["simulator.progress"] * 3 + ["simulator.done"]
    assert lines[-1]["sent"] == 120 and lines[-1]["accepted"] == 120
    assert {"sent", "accepted", "rejected", "rate"} <= set(lines[0])


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="write_key"):
        send([], "http://127.0.0.1:9", "", None)
    with pytest.raises(ValueError, match="time_mode"):
        send([], "http://127.0.0.1:9", "k", None, time_mode="later")  # type: ignore[arg-type]
