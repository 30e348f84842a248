from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ingest.simulator import (
    GroundTruth,
    LoadTime,
    SimEvent,
    SimulatorConfig,
    build_truth,
    corrected_time,
    generate,
    identity_of,
    normalise_query,
    parse_ts,
)

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def _event(seq, payload, at, *, defect=None, duplicate=False, skew=timedelta(0)):
    return SimEvent(seq, payload, at, at + timedelta(milliseconds=50), skew, defect, duplicate)


def _page(mid, path, who, load=100, user=None):
    payload = {"messageId": mid, "type": "page", "anonymousId": who}
    if user:
        payload["userId"] = user
    payload["properties"] = {"path": path, "load_time_ms": load}
    return payload


def _track(mid, name, who, **properties):
    return {
        "messageId": mid,
        "type": "track",
        "event": name,
        "anonymousId": who,
        "properties": properties,
    }


def test_hand_made_run():
    second = timedelta(seconds=1)
    events = [
        _event(0, _page("m0", "/", "a1", 100), T0),
        _event(1, _page("m1", "/", "a2", 300), T0 + 10 * second),
        _event(2, _page("m2", "/docs", "a1", 50), T0 + 20 * second),
        _event(3, _track("m3", "Element Clicked", "a1", element="a", target="/pricing"), T0),
        _event(4, _track("m4", "Site Searched", "a2", query="  Kafka   API ", results_count=3), T0),
        _event(5, _track("m5", "Site Searched", "a1", query="kafka api", results_count=3), T0),
        _event(6, _page("m1", "/", "a2", 300), T0 + 10 * second, duplicate=True),
        _event(7, _page("m7", "/", "a3", 900, user="u3"), T0 + 65 * second),
        _event(8, _page("m8", "/", "", -1), T0, defect="negative_load_time"),
        _event(9, '{"type": "page"}', T0, defect="not_an_object"),
    ]
    truth = build_truth(events)
    m0, m1 = "2024-03-01T12:00:00Z", "2024-03-01T12:01:00Z"
    assert (truth.deliveries, truth.distinct_messages, truth.duplicates) == (10, 9, 1)
    assert truth.valid_events == 7
    assert truth.invalid_by_reason == {"negative_load_time": 1, "not_an_object": 1}
    assert truth.events_per_minute == {m0: 6, m1: 1}
    assert truth.page_views_per_minute == {m0: 3, m1: 1}
    assert truth.page_views == {m0: {"/": 2, "/docs": 1}, m1: {"/": 1}}
    assert truth.page_visitors == {m0: {"/": 2, "/docs": 1}, m1: {"/": 1}}
    assert truth.visitors_per_minute == {m0: 2, m1: 1}
    assert truth.visitors_total == 3
    assert truth.clicks == {m0: {"/pricing": 1}}
    assert truth.searches == {m0: {"kafka api": 2}}
    assert truth.load_time == {
        "/": LoadTime(count=3, sum_ms=1300, max_ms=900),
        "/docs": LoadTime(count=1, sum_ms=50, max_ms=50),
    }


def test_identity_is_user_id_else_anonymous_id():
    assert identity_of({"userId": "u1", "anonymousId": "a1"}) == "u1"
    assert identity_of({"userId": "", "anonymousId": "a1"}) == "a1"
    assert identity_of({"anonymousId": "a1"}) == "a1"
    assert identity_of({}) is None
    events = [
        _event(0, _page("m0", "/", "a1"), T0),
        _event(1, _page("m1", "/", "a1", user="u1"), T0 + timedelta(seconds=1)),
        _event(2, _page("m2", "/", "a2", user="u1"), T0 + timedelta(seconds=2)),
    ]
    truth = build_truth(events)
    # No stitching: before and after login are two visitors; one user on two devices is one.
    assert truth.page_visitors == {"2024-03-01T12:00:00Z": {"/": 2}}
    assert truth.visitors_total == 2


@pytest.mark.parametrize(
    ("typed", "normal"),
    [("Kafka API", "kafka api"), ("  kafka   api ", "kafka api"), ("KAFKA\tAPI", "kafka api")],
)
def test_normalise_query(typed, normal):
    assert normalise_query(typed) == normal


def test_duplicates_and_shuffles_do_not_change_the_truth():
    base = SimulatorConfig(seed=21, events=5000, invalid_rate=0.05, late_rate=0.05)
    clean = build_truth(generate(base))
    noisy = build_truth(generate(replace(base, duplicate_rate=0.3, out_of_order_rate=0.5)))
    assert noisy.duplicates > 1000
    assert noisy.deliveries == clean.deliveries + noisy.duplicates
    same = {"deliveries": 0, "duplicates": 0}
    assert replace(noisy, **same) == replace(clean, **same)


def test_invalid_events_are_excluded_and_counted_by_reason():
    base = SimulatorConfig(seed=22, events=5000)
    broken = generate(replace(base, invalid_rate=0.2))
    invalid_seqs = {e.seq for e in broken if e.defect}
    truth = build_truth(broken)
    assert sum(truth.invalid_by_reason.values()) == len(invalid_seqs)
    assert truth.valid_events == 5000 - len(invalid_seqs)
    # What remains is exactly the truth of the clean run without those events.
    clean_rest = [e for e in generate(base) if e.seq not in invalid_seqs]
    expected = build_truth(clean_rest)
    assert replace(truth, invalid_by_reason={}, deliveries=0, distinct_messages=0) == replace(
        expected, deliveries=0, distinct_messages=0
    )


def test_skewed_clocks_do_not_move_events():
    base = SimulatorConfig(seed=23, events=5000, late_rate=0.05)
    skewed_run = generate(replace(base, skewed_client_rate=0.5, skew_s=7200))
    skewed = [e for e in skewed_run if e.skew]
    assert len(skewed) > 1000
    for e in skewed_run:
        original = parse_ts(e.payload["originalTimestamp"])
        sent = parse_ts(e.payload["sentAt"])
        # The client clock is off by the skew ...
        assert original - e.time == e.skew
        # ... and the collector's correction, received at the true send time, undoes it.
        assert corrected_time(e.sent_at, sent, original) == e.time
    assert build_truth(skewed_run) == build_truth(generate(base))


def test_late_events_land_in_their_true_minutes():
    config = SimulatorConfig(seed=24, events=2000, late_rate=0.2, late_by_s=3600)
    truth = build_truth(generate(config))
    early = [m for m in truth.events_per_minute if parse_ts(m) < config.start]
    assert early and all(parse_ts(m) >= config.start - timedelta(hours=1, minutes=1) for m in early)


def test_json_round_trip():
    truth = build_truth(generate(SimulatorConfig(seed=25, events=3000, invalid_rate=0.1)))
    text = truth.to_json()
    assert GroundTruth.from_json(text) == truth
    assert GroundTruth.from_json(text).to_json() == text
    with pytest.raises(ValueError, match="not a ground truth document"):
        GroundTruth.from_json('{"deliveries": 1}')
