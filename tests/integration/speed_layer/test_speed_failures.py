"""Crashes and outages: kill -9 of the job, Cassandra restarted, data later than the watermark."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from platformctl import platform

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _wait_for_cql(session, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            session.execute("SELECT release_version FROM system.local")
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def _wait_for_rows(session, settings, minimum: int, timeout_s: float = 180) -> int:
    deadline = time.monotonic() + timeout_s
    table = f"{settings.cassandra.keyspace}.speed_site_activity"
    while time.monotonic() < deadline:
        total = sum(r.events for r in session.execute(f"SELECT events FROM {table}"))
        if total >= minimum:
            return total
        time.sleep(1)
    raise AssertionError(f"the speed layer wrote fewer than {minimum} events in {timeout_s}s")


def _chunks(events, n):
    size = len(events) // n + 1
    return [events[i : i + size] for i in range(0, len(events), size)]


def test_kill_9_mid_stream_then_restart_loses_and_doubles_nothing(
    speed_settings, speed_job, cassandra_session, views_match_truth
):
    events = generate(
        SimulatorConfig(
            seed=21, events=2400, duplicate_rate=0.08, skewed_client_rate=0.2, out_of_order_rate=0.3
        )
    )
    first, second, third = _chunks(events, 3)
    produce_direct(first, speed_settings)
    job = speed_job.start(speed_settings)
    try:
        _wait_for_rows(cassandra_session, speed_settings, 1)
        produce_direct(second, speed_settings)
        time.sleep(2)  # mid-stream: batches for the second chunk are under way
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
    produce_direct(third, speed_settings)
    speed_job.drain(speed_settings)
    views_match_truth(build_truth(events), speed_settings)


@pytest.mark.exclusive  # stops the shared Cassandra: run alone
def test_cassandra_restart_mid_stream_then_resume_equals_truth(
    speed_settings, speed_job, cassandra_session, views_match_truth
):
    events = generate(SimulatorConfig(seed=33, events=1800, duplicate_rate=0.05))
    first, second = _chunks(events, 2)
    produce_direct(first, speed_settings)
    job = speed_job.start(speed_settings)
    try:
        _wait_for_rows(cassandra_session, speed_settings, 1)
        platform.down(speed_settings, ("cassandra",))
        produce_direct(second, speed_settings)
        # Its writes fail: the job stops with an error rather than skip a micro-batch,
        # and its checkpoint still points before the batch it could not write.
        try:
            code = job.wait(180)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            raise AssertionError(speed_job.log_tail(job)) from None
        assert code != 0
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        platform.up(speed_settings, ("cassandra",), install_missing=False)
        _wait_for_cql(cassandra_session)
    speed_job.drain(speed_settings)
    views_match_truth(build_truth(events), speed_settings)


def test_events_later_than_the_watermark_leave_closed_windows_alone(
    speed_settings, speed_job, cassandra_session, read_view
):
    from dataclasses import replace

    from ingest.simulator import format_ts

    events = generate(SimulatorConfig(seed=44, events=900, rate=1.0))  # ~15 minutes of traffic
    produce_direct(events, speed_settings)
    speed_job.drain(speed_settings)
    before = {k: r.page_views for k, r in read_view(speed_settings, "page_activity").items()}

    # A page view of the first minute, arriving after the watermark passed it.
    original = next(
        e
        for e in events
        if isinstance(e.payload, dict) and e.payload.get("type") == "page" and not e.defect
    )
    late_time = events[0].time
    assert max(e.time for e in events) - late_time > timedelta(minutes=10)
    payload = dict(original.payload) | {
        "messageId": "late-arrival",
        "originalTimestamp": format_ts(late_time),
        "sentAt": format_ts(original.sent_at),
    }
    late = replace(original, payload=payload, time=late_time, skew=timedelta(0))
    produce_direct([late], speed_settings)
    speed_job.drain(speed_settings)

    after = {k: r.page_views for k, r in read_view(speed_settings, "page_activity").items()}
    assert after == before  # the closed window was not touched: the batch layer places it
    progress = {
        row.view_name: row.late_rows_dropped
        for row in cassandra_session.execute(
            f"SELECT view_name, late_rows_dropped FROM {speed_settings.cassandra.keyspace}"
            ".speed_progress"
        )
    }
    assert progress["page_activity"] >= 1
