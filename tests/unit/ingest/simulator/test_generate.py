from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from datetime import timedelta

import pytest

from ingest.simulator import (
    DEFECTS,
    SimulatorConfig,
    build_site,
    build_truth,
    generate,
    parse_ts,
)

ISO_MS_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


@pytest.fixture(scope="module")
def faulty() -> tuple[SimulatorConfig, list]:
    config = SimulatorConfig(
        seed=11,
        events=20_000,
        users=2000,
        batch_size=20,
        duplicate_rate=0.1,
        late_rate=0.1,
        late_by_s=900,
        out_of_order_rate=0.1,
        skewed_client_rate=0.1,
        skew_s=3600,
        invalid_rate=0.1,
    )
    return config, generate(config)


def _distinct(events):
    return [e for e in events if not e.duplicate]


def test_same_seed_same_events_other_seed_other_events():
    config = SimulatorConfig(seed=3, events=2000, duplicate_rate=0.1, invalid_rate=0.1)
    first, second = generate(config), generate(config)
    assert [e.payload for e in first] == [e.payload for e in second]
    assert [(e.time, e.sent_at, e.skew, e.defect) for e in first] == [
        (e.time, e.sent_at, e.skew, e.defect) for e in second
    ]
    other = generate(replace(config, seed=4))
    ids = {e.message_id for e in first} - {None}
    assert ids.isdisjoint({e.message_id for e in other})


def test_wire_format_is_segment_spec():
    events = generate(SimulatorConfig(seed=5, events=3000))
    kinds = Counter(e.payload["type"] for e in events)
    assert set(kinds) == {"page", "track", "identify"}
    assert kinds["page"] > kinds["track"] > kinds["identify"] > 0
    assert len({e.message_id for e in events}) == len(events)
    for event in events:
        p = event.payload
        assert ISO_MS_Z.match(p["originalTimestamp"]) and ISO_MS_Z.match(p["sentAt"])
        assert p["anonymousId"]
        assert p["context"]["library"] == {"name": "simulator", "version": "1.0.0"}
        assert {"userAgent", "locale", "page"} <= set(p["context"])
        if p["type"] == "page":
            props = p["properties"]
            assert props["url"].startswith("https://www.example.com" + props["path"])
            assert isinstance(props["load_time_ms"], int) and props["load_time_ms"] > 0
            assert p["context"]["page"]["path"] == props["path"]
        elif p["type"] == "track":
            assert p["event"] in {"Element Clicked", "Site Searched"}
            expected = (
                {"element", "target"}
                if p["event"] == "Element Clicked"
                else {
                    "query",
                    "results_count",
                }
            )
            assert set(p["properties"]) == expected
        else:
            assert p["userId"] and p["traits"]["email"]


def test_sessions_land_from_outside_then_follow_the_site():
    events = generate(SimulatorConfig(seed=5, events=5000))
    referrers = Counter()
    for e in events:
        if e.payload["type"] == "page":
            ref = e.payload["properties"]["referrer"]
            referrers[
                "site" if ref.startswith("https://www.example.com/") else ref or "direct"
            ] += 1
    assert referrers["site"] > referrers["direct"] > 0
    assert referrers["https://www.google.com/"] > 0
    campaigns = [e for e in events if "campaign" in e.payload["context"]]
    assert campaigns and all(
        set(e.payload["context"]["campaign"]) == {"name", "source", "medium"} for e in campaigns
    )


def test_once_identified_events_carry_the_user_id():
    events = generate(SimulatorConfig(seed=8, events=5000, users=200))
    seen_identify: set[str] = set()
    for e in events:  # no faults: send order is event order
        anonymous = e.payload["anonymousId"]
        if e.payload["type"] == "identify":
            seen_identify.add(anonymous)
        assert ("userId" in e.payload) == (anonymous in seen_identify)


def test_event_times_follow_the_target_rate():
    config = SimulatorConfig(seed=2, events=10_000, rate=500)
    events = generate(config)
    span = (events[-1].time - events[0].time).total_seconds()
    assert span == pytest.approx(10_000 / 500, rel=0.05)
    assert events[0].time >= config.start
    times = [e.time for e in events]
    assert times == sorted(times)
    by_duration = generate(replace(config, events=None, duration_s=30))
    assert len(by_duration) == pytest.approx(30 * 500, rel=0.05)
    assert max(e.time for e in by_duration) < config.start + timedelta(seconds=30)


def test_zipf_popularity_top_page_far_above_median():
    events = generate(SimulatorConfig(seed=9, events=20_000))
    views = Counter(e.payload["properties"]["path"] for e in events if e.payload["type"] == "page")
    ranked = [count for _, count in views.most_common()]
    assert ranked[0] > 10 * ranked[len(ranked) // 2]
    pages = build_site(9).pages
    assert views[pages[0].path] > views[pages[9].path] > views[pages[99].path]


def test_duplicate_share_and_later_batch(faulty):
    config, events = faulty
    distinct = _distinct(events)
    assert len(distinct) == config.events
    duplicates = [i for i, e in enumerate(events) if e.duplicate]
    assert len(duplicates) / len(distinct) == pytest.approx(0.1, abs=0.015)
    first_at = {}
    for index, e in enumerate(events):
        first_at.setdefault(e.seq, index)
    last_batch = (len(events) - 1) // config.batch_size
    for i in duplicates:
        original_batch = first_at[events[i].seq] // config.batch_size
        # A later batch; only at the very end of the run may it be the same (last) one.
        assert i // config.batch_size > original_batch or original_batch == last_batch
        assert i > first_at[events[i].seq]
        original = events[first_at[events[i].seq]]
        assert original.message_id == events[i].message_id or original.defect == "not_an_object"
        assert original.time == events[i].time


def test_late_share_and_lateness(faulty):
    config, events = faulty
    distinct = _distinct(events)
    late = [e for e in distinct if e.sent_at - e.time >= timedelta(seconds=config.late_by_s)]
    assert len(late) / len(distinct) == pytest.approx(0.1, abs=0.015)
    late_seqs = {e.seq for e in late}
    on_time = [e for e in distinct if e.seq not in late_seqs]
    assert max(e.sent_at - e.time for e in on_time) < timedelta(seconds=5)
    for e in late:
        if isinstance(e.payload, dict):
            age = parse_ts(e.payload["sentAt"]) - parse_ts(e.payload["originalTimestamp"])
            assert age >= timedelta(seconds=config.late_by_s)


def test_skewed_client_share(faulty):
    config, events = faulty
    clients: dict[str, timedelta] = {}
    for e in events:
        if isinstance(e.payload, dict) and "anonymousId" in e.payload:
            clients[e.payload["anonymousId"]] = e.skew
    skewed = [s for s in clients.values() if s]
    assert len(skewed) / len(clients) == pytest.approx(0.1, abs=0.03)
    assert {abs(s) for s in skewed} == {timedelta(seconds=config.skew_s)}
    assert {s > timedelta(0) for s in skewed} == {True, False}
    for e in events:
        if isinstance(e.payload, dict) and e.skew:
            assert parse_ts(e.payload["originalTimestamp"]) == e.time + e.skew
            assert parse_ts(e.payload["sentAt"]) == e.sent_at + e.skew


def test_invalid_share_and_labels(faulty):
    _, events = faulty
    distinct = _distinct(events)
    defects = Counter(e.defect for e in distinct if e.defect)
    assert sum(defects.values()) / len(distinct) == pytest.approx(0.1, abs=0.015)
    assert set(defects) == set(DEFECTS)
    for e in distinct:
        p = e.payload
        if e.defect == "not_an_object":
            assert isinstance(p, str) and json.loads(p)["messageId"]
        elif e.defect == "missing_identity":
            assert "userId" not in p and "anonymousId" not in p
        elif e.defect == "negative_load_time":
            assert p["properties"]["load_time_ms"] < 0
        elif e.defect == "track_without_event":
            assert p["type"] == "track" and "event" not in p
        elif e.defect == "bad_type":
            assert p["type"] not in {"page", "track", "identify"}
        elif e.defect == "wrong_property_type":
            props = p["properties"]
            assert isinstance(props.get("load_time_ms", props.get("results_count")), str)


def test_out_of_order_share(faulty):
    config, events = faulty
    batches = [events[i : i + config.batch_size] for i in range(0, len(events), config.batch_size)]
    shuffled = 0
    for batch in batches:
        seqs = [e.seq for e in batch if not e.duplicate]
        shuffled += seqs != sorted(seqs)
    assert shuffled / len(batches) == pytest.approx(0.1, abs=0.03)


def test_one_knob_leaves_the_clean_traffic_alone():
    clean = generate(SimulatorConfig(seed=4, events=3000))
    noisy = generate(
        SimulatorConfig(seed=4, events=3000, duplicate_rate=0.2, out_of_order_rate=0.5)
    )
    by_seq = {e.seq: e for e in noisy if not e.duplicate}
    for e in clean:
        other = by_seq[e.seq]
        assert other.message_id == e.message_id and other.time == e.time
        assert other.payload["originalTimestamp"] == e.payload["originalTimestamp"]


def test_the_slowest_pages_are_the_deliberately_slow_ones():
    config = SimulatorConfig(seed=9, events=20_000)
    truth = build_truth(generate(config))
    slow = {p.path for p in build_site(config.seed).pages if p.slow}
    mean = {path: s.sum_ms / s.count for path, s in truth.load_time.items() if s.count >= 10}
    slowest = sorted(mean, key=mean.get, reverse=True)[: len(slow & set(mean))]
    assert slow & set(mean) and set(slowest) == slow & set(mean)
    assert all(s.max_ms <= 600_000 for s in truth.load_time.values())
