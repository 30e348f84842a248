"""``web_sessions`` over simulated traffic equals the sessions its ground truth finds.

The simulator's events go through the collector's intake and the contract's parse
as silver holds them (each once); the transformation sees only what it reads
(``READS``); its rows must equal :func:`build_session_truth`'s, column by column,
over a night of traffic that crosses midnight, with duplicates, late and invalid
events and skewed clients. Hand-made events pin the rules at their edges.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from data_contracts import load_contract
from derived import web_sessions
from derived.inputs import project
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.session_truth import build_session_truth
from pipelines import derived_pipeline
from tests.support.silver import web_silver_rows

pytestmark = pytest.mark.slow

SESSIONS = derived_pipeline("web_sessions")


def _sessions(spark, calls):
    silver = web_silver_rows(spark, calls)
    inputs = {"web_events": project(silver, web_sessions.READS["web_events"])}
    rows = web_sessions.build(inputs).collect()
    return sorted((r.asDict() for r in rows), key=lambda r: r["session_id"])


def _utc(rows):
    """Timestamps as aware UTC datetimes (PySpark collects them naive, in local time)."""
    return [
        {k: v.astimezone(UTC) if isinstance(v, datetime) else v for k, v in row.items()}
        for row in rows
    ]


def test_the_sessions_of_a_night_of_traffic_equal_the_truth(spark):
    config = SimulatorConfig(
        seed=11,
        events=2500,
        rate=0.2,
        users=120,
        start=datetime(2024, 3, 1, 22, 0, tzinfo=UTC),
        duplicate_rate=0.02,
        late_rate=0.02,
        out_of_order_rate=0.1,
        invalid_rate=0.02,
        skewed_client_rate=0.05,
    )
    events = generate(config)
    found = _utc(_sessions(spark, [(e.payload, e.sent_at) for e in events]))
    truth = build_session_truth(events)
    days = {s["session_date"] for s in truth}
    assert len(days) == 2, "the traffic crosses midnight"
    assert any(s["referrer"] is None for s in truth) and any(s["campaign_name"] for s in truth)
    visitors = [s["visitor_id"] for s in truth]
    assert len(visitors) > len(set(visitors)), "visitors come back after 30 minutes"
    assert [r["session_id"] for r in found] == [s["session_id"] for s in truth]
    assert found == truth
    contract = load_contract(SESSIONS.contract, SESSIONS.contract_major)
    assert list(found[0]) == [str(p.name) for p in contract.properties]


def _call(at, message_id, *, kind="page", user=None, event=None, path="/a", agent=None):
    body = {
        "type": kind,
        "messageId": message_id,
        "anonymousId": "browser-1",
        "timestamp": at.isoformat().replace("+00:00", "Z"),
        "context": {"page": {"path": path, "referrer": ""}},
    }
    if kind == "page":
        body["properties"] = {"path": path}
    if user:
        body["userId"] = user
    if event:
        body["event"] = event
    if agent:
        body["context"]["userAgent"] = agent
    return body, at


def test_thirty_minutes_apart_is_one_session_a_moment_more_or_midnight_starts_another(spark):
    t = datetime(2024, 3, 1, 22, 30, tzinfo=UTC)
    calls = [
        _call(t, "m1", agent="Mozilla/5.0 (Linux; Android 14; Pixel 8)"),
        _call(t + timedelta(minutes=30), "m2", kind="track", event="Order Completed", user="u-1"),
        _call(t + timedelta(minutes=60, milliseconds=1), "m3", kind="identify", user="u-2"),
        _call(t + timedelta(minutes=80), "m4", path="/b"),
        _call(t + timedelta(minutes=95), "m5"),  # 00:05 the next day, 15 minutes later
    ]
    found = _sessions(spark, calls)
    assert [(r["session_id"], r["events"], r["pages"]) for r in found] == [
        ("simulator/m1", 2, 1),
        ("simulator/m3", 2, 1),
        ("simulator/m5", 1, 1),
    ]
    first, second, _ = found
    assert (first["duration_ms"], first["converted"], first["user_id"]) == (1_800_000, True, "u-1")
    assert (first["device"], first["referrer"], first["landing_page"]) == ("mobile", None, "/a")
    assert (second["landing_page"], second["device"], second["converted"]) == ("/b", None, False)
    assert second["user_id"] == "u-2"
    assert [str(r["session_date"]) for r in found] == ["2024-03-01", "2024-03-01", "2024-03-02"]
