"""The speed layer on a Spark standalone cluster (a master and two workers started by
``platformctl``, executors in the workers' JVMs): a worker killed with ``kill -9``
mid-stream loses and doubles nothing, and the views equal ground truth. The views are
folded on the executors (``speed.fold``), so the worker may die mid-fold; every other
speed test folds on the driver, the default with one partition per view.

The batch layer on the cluster, against ground truth and with workers killed, is
``tests/integration/batch_layer/test_cluster_dags.py``.
"""

from __future__ import annotations

import signal
import time

import pytest

from core.settings import Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from platformctl import platform
from tests.support.spark_cluster import (
    finished_applications,
    kill_node,
    on_cluster,
)

# Three more JVMs and each application's executors: after the parallel part, beside the
# other clusters' tests; on the worker that holds the run's standalone cluster.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.cluster,
    pytest.mark.xdist_group("spark_cluster"),
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


def test_a_worker_killed_mid_stream_loses_and_doubles_nothing(
    cluster, speed_settings, speed_job, views_match_truth, cassandra_session, wait_for
):
    # The fold on the executors, as on a cluster with more partitions than one: the worker
    # killed may hold a micro-batch's fold half done.
    speed = speed_settings.speed.model_copy(update={"fold": "executors"})
    settings = on_cluster(cluster, speed_settings.model_copy(update={"speed": speed}))
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
    # It ran as an application of the cluster, not in a local driver.
    assert "speed-layer" in finished_applications(cluster, "speed-layer")
