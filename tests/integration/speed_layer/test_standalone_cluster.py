"""The speed layer and a batch pipeline run on a Spark standalone cluster (a master and two
workers started by ``platformctl``, executors in the workers' JVMs), against ground truth;
and a worker killed with ``kill -9`` mid-stream loses and doubles nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from core.settings import PROJECT_ROOT, Settings, child_env
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from platformctl import platform
from tests.support.spark_cluster import (
    finished_applications,
    kill_node,
    on_cluster,
)

# Three more JVMs and each application's executors: alone, after the parallel part.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.exclusive,
    pytest.mark.timeout(1800),
]


@pytest.fixture
def cluster(spark_cluster: Settings) -> Settings:
    return spark_cluster


def _applications(cluster: Settings) -> list[dict]:
    from platformctl.services.spark import cluster_state

    state, why = cluster_state(cluster)
    assert state is not None, why
    return state.apps


def _published_events_per_minute(session, keyspace: str) -> dict[str, int]:
    """``site_activity`` as serving reads it from the batch tables: each day's current
    version."""
    versions = {
        row.day.date(): row.version
        for row in session.execute(
            f"SELECT day, version FROM {keyspace}.batch_days WHERE view_name = 'site_activity'"
        )
    }
    rows = session.execute(
        f"SELECT day, version, window_start, events FROM {keyspace}.batch_site_activity"
    )
    return {
        row.window_start.strftime("%Y-%m-%dT%H:%M:00Z"): row.events
        for row in rows
        if versions.get(row.day.date()) == row.version
    }


def test_speed_and_batch_on_the_cluster_equal_ground_truth(
    cluster, speed_settings, speed_job, views_match_truth, cassandra_session
):
    settings = on_cluster(cluster, speed_settings)
    start = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=4)
    events = generate(
        SimulatorConfig(seed=71, events=600, rate=0.1, start=start, duplicate_rate=0.05)
    )
    truth = build_truth(events)
    produce_direct(events, settings)

    # The speed job as the platform runs it, its executors on the workers.
    job = speed_job.start(settings, "--drain")
    assert job.wait(600) == 0, speed_job.log_tail(job)
    views_match_truth(truth, settings)

    # Every batch step in one driver of the cluster; publish loads days long closed.
    batch = settings.model_copy(
        update={"batch": settings.batch.model_copy(update={"lateness_s": 60})}
    )
    run = subprocess.run(
        [sys.executable, "-m", "batch_layer", "all", "--pipeline", "web_events"],
        env=child_env(batch),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    published = _published_events_per_minute(cassandra_session, settings.cassandra.keyspace)
    assert published == truth.events_per_minute
    # Both ran as applications of the cluster, not in a local driver.
    assert {"speed-layer", "batch-web_events-all"} <= finished_applications(cluster)


def test_a_worker_killed_mid_stream_loses_and_doubles_nothing(
    cluster, speed_settings, speed_job, views_match_truth, cassandra_session, wait_for
):
    settings = on_cluster(cluster, speed_settings)
    events = generate(SimulatorConfig(seed=72, events=2400, duplicate_rate=0.08))
    size = len(events) // 3 + 1
    first, second, third = (events[i : i + size] for i in range(0, len(events), size))
    table = f"{settings.cassandra.keyspace}.speed_site_activity"

    def counted() -> int:
        return sum(r.events for r in cassandra_session.execute(f"SELECT events FROM {table}"))

    produce_direct(first, settings)
    job = speed_job.start(settings)
    try:
        wait_for(lambda: counted() > 0, 300, "the first micro-batches", job)
        assert any(app["name"] == "speed-layer" for app in _applications(cluster))
        produce_direct(second, settings)
        time.sleep(2)  # mid-stream: micro-batches of the second chunk are under way
        kill_node(cluster, 1)  # the worker and its executors, as a machine dies
        produce_direct(third, settings)
        wait_for(lambda: counted() > len(first), 300, "micro-batches after the kill", job)
        platform.up(cluster, ("spark-worker-1",), install_missing=False)
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(180)
    assert code == 0, speed_job.log_tail(job)
    # What the live job had not folded yet, on the cluster again; then every view is exact.
    drain = speed_job.start(settings, "--drain")
    assert drain.wait(600) == 0, speed_job.log_tail(drain)
    views_match_truth(build_truth(events), settings)
