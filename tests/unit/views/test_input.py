"""The views' input: every record is a valid event or a reject with the reason both layers use."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from data_contracts import load_contract
from views.input import REJECT_REASONS, parse_records

pytestmark = pytest.mark.slow

RECEIVED = "2026-01-01T12:00:00Z"


def _event(event_id: str | None = "e1", timestamp: str | None = "2026-01-01T11:59:00Z") -> bytes:
    event = {"type": "page", "anonymousId": "a-1", "receivedAt": RECEIVED, "source_id": "s"}
    event |= {"event_id": event_id} if event_id else {}
    event |= {"timestamp": timestamp} if timestamp else {}
    return json.dumps(event).encode()


def test_each_record_is_an_event_or_a_reject_with_its_reason(spark):
    values = [
        _event(),
        b"{not json",
        b"",
        b'"a string"',
        b"[1, 2]",
        _event(event_id=None),
        _event(timestamp=None),
        _event("ahead", timestamp="2026-01-01T12:01:00.001Z"),
    ]
    records = spark.createDataFrame(
        [(0, offset, value) for offset, value in enumerate(values)],
        "partition INT, offset LONG, value BINARY",
    )
    events, rejects = parse_records(records, load_contract(), timedelta(seconds=60))
    assert [(r.offset, r.event_id) for r in events.collect()] == [(0, "e1")]
    assert "_corrupt_record" not in events.columns
    assert {"event_time", "event_date", "partition", "offset"} <= set(events.columns)
    reasons = {r.offset: r.reason for r in rejects.collect()}
    assert reasons == {
        1: "unparseable",
        2: "unparseable",
        3: "unparseable",
        4: "unparseable",
        5: "missing:event_id",
        6: "missing:timestamp",
        7: "invalid:timestamp_future",
    }
    assert set(reasons.values()) == set(REJECT_REASONS)


def test_the_payload_keeps_what_the_contract_does_not_type(spark):
    from pyspark.sql import functions as F

    event = json.loads(_event())
    event["properties"] = {"revenue": 9.5, "custom": {"deep": [1, 2]}}
    records = spark.createDataFrame(
        [(0, 0, json.dumps(event).encode())], "partition INT, offset LONG, value BINARY"
    )
    plain, _ = parse_records(records, load_contract(), timedelta(seconds=60))
    assert "payload" not in plain.columns, "only silver keeps the whole event"
    whole, _ = parse_records(records, load_contract(), timedelta(seconds=60), payload=True)
    row = whole.select(
        F.expr("payload:properties.revenue::double").alias("revenue"),
        F.expr("payload:properties.custom.deep[1]::int").alias("deep"),
    ).first()
    assert (row.revenue, row.deep) == (9.5, 2)
