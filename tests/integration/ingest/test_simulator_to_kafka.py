"""Simulated traffic through the real collector into the real Kafka, checked against truth.

Duplicates, skewed clocks, late, shuffled and invalid events included: after
deduplication on event_id the topic holds exactly the valid events, each
placed at its true time, and every invalid one is in the dead-letter topic.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate, send

pytestmark = pytest.mark.integration


def test_simulated_traffic_lands_exactly_once_after_dedup(collector, consume):
    config = SimulatorConfig(
        seed=11,
        events=1500,
        duplicate_rate=0.05,
        late_rate=0.03,
        out_of_order_rate=0.2,
        skewed_client_rate=0.2,
        skew_s=3600,
        invalid_rate=0.04,
        batch_size=100,
    )
    events = generate(config)
    truth = build_truth(events)
    report = send(events, collector.url, collector.write_key, progress=False)
    assert report.sent == truth.deliveries
    assert report.rejected == sum(1 for e in events if e.defect)  # every delivery of one

    records = consume(
        collector.settings,
        collector.settings.kafka.events_topic,
        truth.deliveries - report.rejected,
    )
    delivered = [json.loads(r.value()) for r in records]
    by_id = {event["event_id"]: event for event in delivered}
    valid = {e.message_id: e for e in events if not e.defect}
    assert set(by_id) == set(valid)  # nothing lost, nothing foreign
    assert len(delivered) - len(by_id) == sum(1 for e in events if e.duplicate and not e.defect)

    # Skew correction: each event's timestamp is its true time (plus network latency).
    for event_id, event in by_id.items():
        corrected = datetime.fromisoformat(event["timestamp"])
        error = (corrected - valid[event_id].time).total_seconds()
        assert 0 <= error < 5, (event_id, error)

    # Per-type counts of distinct valid events match the truth's site totals.
    page_views = sum(1 for e in by_id.values() if e["type"] == "page")
    assert page_views == sum(truth.page_views_per_minute.values())
    assert len(by_id) == truth.valid_events

    letters = consume(collector.settings, collector.settings.kafka.dlq_topic, report.rejected)
    assert len(letters) == report.rejected
    reasons = Counter(json.loads(r.value())["reason"] for r in letters)
    assert sum(reasons.values()) == sum(truth.invalid_by_reason.values()) + sum(
        1 for e in events if e.defect and e.duplicate
    )
