"""The views' input: every record is a valid event or a reject with the reason both layers use."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pyspark.sql import DataFrame

from core.frames import local_frame
from data_contracts import load_contract
from views.common import minute_window, window_start
from views.input import REJECT_REASONS, parse_records
from views.spec import Measure, ViewSpec

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
    records = local_frame(
        spark,
        [(0, offset, value) for offset, value in enumerate(values)],
        "partition INT, offset LONG, value BINARY",
    )
    events, rejects = parse_records(records, load_contract("web_events", 1), timedelta(seconds=60))
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
    records = local_frame(
        spark, [(0, 0, json.dumps(event).encode())], "partition INT, offset LONG, value BINARY"
    )
    plain, _ = parse_records(records, load_contract("web_events", 1), timedelta(seconds=60))
    assert "payload" not in plain.columns, "only silver keeps the whole event"
    whole, _ = parse_records(
        records, load_contract("web_events", 1), timedelta(seconds=60), payload=True
    )
    row = whole.select(
        F.expr("payload:properties.revenue::double").alias("revenue"),
        F.expr("payload:properties.custom.deep[1]::int").alias("deep"),
    ).first()
    assert (row.revenue, row.deep) == (9.5, 2)


def _page(n: int, second: int, path: str, engaged_ms: float | None, version: str) -> dict:
    """A page call as the collector writes it, under contract ``version``."""
    at = f"2026-01-01T12:{second // 60:02d}:{second % 60:02d}Z"
    properties = {"path": path} | ({"engaged_ms": engaged_ms} if engaged_ms is not None else {})
    return {
        "event_id": f"e{n}",
        "messageId": f"e{n}",
        "type": "page",
        "anonymousId": f"a{n}",
        "properties": properties,
        "timestamp": at,
        "receivedAt": at,
        "source_id": "s",
        "contract_version": version,
    }


# Written before 1.1 (no engaged_ms) and after it, with and without the field; three files,
# so the streaming run folds partial rows of the same window across micro-batches.
ENGAGED = [
    _page(1, 5, "/", None, "1.0.0"),
    _page(2, 10, "/", 1500, "1.1.0"),
    _page(3, 20, "/docs", None, "1.1.0"),
    _page(4, 30, "/", 2500.5, "1.1.0"),
    _page(5, 40, "/docs", None, "1.0.0"),
    _page(6, 50, "/", None, "1.1.0"),
    _page(7, 70, "/", 800, "1.1.0"),
]


def build_engaged_time(events: DataFrame) -> DataFrame:
    """Engaged time per page per minute, as a view over ``properties.engaged_ms`` reads it."""
    from pyspark.sql import functions as F

    engaged = F.col("properties.engaged_ms")
    return (
        events.where(F.col("type") == "page")
        .groupBy(minute_window(), F.col("properties.path").alias("path"))
        .agg(
            F.count(engaged).alias("engaged_count"),
            F.sum(engaged).alias("engaged_sum"),
            F.max(engaged).alias("engaged_max"),
        )
        .select(window_start(), *ENGAGED_TIME.columns[1:])
    )


ENGAGED_TIME = ViewSpec(
    name="engaged_time",
    keys=("path",),
    measures=(
        Measure("engaged_count", "count", "Page views that reported an engaged time."),
        Measure("engaged_sum", "sum", "Sum of engaged times, ms."),
        Measure("engaged_max", "max", "Longest engaged time, ms."),
    ),
    build=build_engaged_time,
    description="Per page path per minute: engaged time (a view over contract 1.1's field).",
)


def test_the_views_receive_engaged_time_typed_in_both_modes(runner, mode, write_events, tmp_path):
    """The field of 1.1 reaches the views as a double; events without it, 1.0's too, count."""
    from pyspark.sql import types as T

    source = write_events(ENGAGED, tmp_path / "engaged")
    events = runner.events(source)
    assert events.schema["properties"].dataType["engaged_ms"].dataType == T.DoubleType()
    assert events.count() == len(ENGAGED)

    if mode == "batch":
        got = runner.batch(ENGAGED_TIME, source)
    else:
        got = runner.streams([ENGAGED_TIME], source)[ENGAGED_TIME.name].table
    m0, m1 = "2026-01-01T12:00:00Z", "2026-01-01T12:01:00Z"
    assert got == {
        (m0, "/"): {"engaged_count": 2, "engaged_sum": 4000.5, "engaged_max": 2500.5},
        (m0, "/docs"): {"engaged_count": 0, "engaged_sum": None, "engaged_max": None},
        (m1, "/"): {"engaged_count": 1, "engaged_sum": 800.0, "engaged_max": 800.0},
    }
