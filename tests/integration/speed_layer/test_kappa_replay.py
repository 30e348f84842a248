"""Kappa replay on the real platform: a new version catches up beside the live job, serving
switches to it without a gap, and the old version is dropped."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from core.settings import Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.speed import speed_cli

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINUTE = 60_000


class LiveTraffic(threading.Thread):
    """Send simulated events as their time comes (real-time traffic), in small batches."""

    def __init__(self, events, settings: Settings) -> None:
        super().__init__(daemon=True)
        self.events, self.settings = events, settings
        self.sent: list = []
        self.stop = threading.Event()  # set when the test ends, before its topic is dropped

    def run(self) -> None:
        pending = sorted(self.events, key=lambda e: e.sent_at)
        while pending and not self.stop.is_set():
            now = datetime.now(UTC)
            due = [e for e in pending if e.sent_at <= now]
            pending = pending[len(due) :]
            if due:
                produce_direct(due, self.settings)
                self.sent += due
            time.sleep(0.5)


def tables_of(session, settings: Settings) -> set[str]:
    rows = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s",
        (settings.cassandra.keyspace,),
    )
    return {row.table_name for row in rows}


class Dashboard:
    """Serving's answers, asked repeatedly as a dashboard does, recorded for the checks."""

    def __init__(self, settings: Settings, lo: int) -> None:
        self.settings, self.lo = settings, lo
        self.answers: list[dict] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._poll()), daemon=True)

    async def _poll(self) -> None:
        from core.cassandra import connect
        from serving.query import Queries
        from serving.store import ServingStore

        cluster, session = connect(self.settings.cassandra)
        try:
            store = ServingStore(session, self.settings.cassandra.keyspace, pointer_cache_s=0.2)
            queries = Queries(store)
            while not self.stop.is_set():
                hi = (int(time.time() * 1000) // MINUTE + 1) * MINUTE
                answer = await queries.timeseries("site_activity", [("all",)], self.lo, hi)
                self.answers.append(answer)
                await asyncio.sleep(0.3)
        finally:
            cluster.shutdown()


def _buckets(answer: dict) -> dict[str, int]:
    (series,) = answer["series"]
    return {b["start"]: b["events"] for b in series["buckets"]}


def test_a_replay_catches_up_switches_without_a_gap_and_drops_the_old_version(
    replay_settings, speed_job, cassandra_session, views_match_truth, speed_version, wait_for
):
    settings = replay_settings
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start = now - timedelta(minutes=12)
    history = generate(SimulatorConfig(seed=41, events=1500, rate=5.0, start=start))
    produce_direct(history, settings)
    closed = build_truth(history).events_per_minute  # windows long past the watermark

    job = speed_job.start(settings)
    dashboard = traffic = None
    try:
        site = f"{settings.cassandra.keyspace}.speed_site_activity"

        def history_counted() -> bool:
            rows = cassandra_session.execute(f"SELECT events FROM {site}")
            return sum(r.events for r in rows) >= sum(closed.values())

        wait_for(history_counted, 240, "the live run to count the history", job)

        traffic_start = datetime.now(UTC)
        live = generate(SimulatorConfig(seed=42, events=600, rate=10.0, start=traffic_start))
        traffic = LiveTraffic(live, settings)
        traffic.start()
        dashboard = Dashboard(settings, int(start.timestamp() * 1000))
        dashboard.thread.start()

        done = speed_cli(settings, "replay", "--from", "earliest")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "version 1" in done.stdout

        from pipelines import pipeline
        from platformctl.services.speed import runs_summary

        web = pipeline("web_events").stream_settings(settings)
        summaries = []

        def switched() -> bool:
            summaries.append(runs_summary(web, datetime.now(UTC)))
            return speed_version(settings, "site_activity") == 1

        wait_for(switched, 300, "the replay to switch", job)
        assert any("replay run 1 into version 1 catching up" in s for s in summaries), summaries
        # Serving's pointer moves first; the runs' states follow within the same switch.
        wait_for(
            lambda: "run 1 live on version 1" in runs_summary(web, datetime.now(UTC)),
            30,
            "the replay's run to be shown live",
            job,
        )

        # The old version's tables are dropped after the grace period; the new ones stay.
        wait_for(
            lambda: "speed_site_activity" not in tables_of(cassandra_session, settings),
            60,
            "the old version to be dropped",
            job,
        )
        assert "speed_v1_site_activity_by_minute" in tables_of(cassandra_session, settings)

        traffic.join(120)
        everything = history + traffic.sent
        truth = build_truth(everything)

        def all_counted() -> bool:
            answer = dashboard.answers[-1] if dashboard.answers else None
            return answer is not None and sum(_buckets(answer).values()) == truth.valid_events

        wait_for(all_counted, 180, "the new version to count the live traffic", job)
    finally:
        if traffic is not None:
            traffic.stop.set()
            traffic.join(30)
        if dashboard is not None:
            dashboard.stop.set()
            dashboard.thread.join(30)
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    assert code == 0, speed_job.log_tail(job)

    # Across the switch, every answer held the closed windows exactly and never dropped one.
    versions = {a["speed_version"]["site_activity"] for a in dashboard.answers}
    assert versions == {0, 1}, versions
    for answer in dashboard.answers:
        buckets = _buckets(answer)
        assert {m: buckets.get(m) for m in closed} == closed
        assert min(buckets[m] for m in closed) > 0

    # The new version holds every view exactly, for the whole retained log.
    views_match_truth(truth, settings)


def test_a_damaged_checkpoint_is_repaired_by_a_replay(
    replay_settings, speed_job, cassandra_session, views_match_truth, speed_version, wait_for
):
    """The live run cannot start (its checkpoint is corrupt); a replay rebuilds the views
    into a new version and the job runs on it."""
    from pathlib import Path

    from pipelines import pipeline

    settings = replay_settings
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=15)
    events = generate(SimulatorConfig(seed=61, events=900, rate=5.0, start=start))
    produce_direct(events, settings)
    speed_job.drain(settings)

    runs = pipeline("web_events").stream_settings(settings).speed.checkpoint_name
    offsets = Path(settings.lake.checkpoint_root) / runs / "views/offsets"
    newest = max(offsets.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    newest.write_text("not an offset log\n")
    broken = speed_job.start(settings)
    assert broken.wait(300) != 0, "a corrupt checkpoint must stop the job, not be skipped"

    done = speed_cli(settings, "replay", "--from", "earliest")
    assert done.returncode == 0, done.stdout + done.stderr
    job = speed_job.start(settings)
    try:
        wait_for(lambda: speed_version(settings, "page_activity") == 1, 300, "the switch", job)
        assert (
            "speed.live_failed" in speed_job.log_tail(job) or "live_failed" in job.log.read_text()
        )
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    assert code == 0, speed_job.log_tail(job)
    views_match_truth(build_truth(events), settings)
