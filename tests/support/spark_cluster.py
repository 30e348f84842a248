"""A Spark standalone cluster of a test's own (a master and two workers started by
``platformctl``), and what tests read of it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.settings import Settings
from platformctl import platform
from tests.support.ports import free_port

__all__ = [
    "finished_applications",
    "kill_node",
    "on_cluster",
    "standalone_cluster",
    "worker_pid",
]


@contextmanager
def standalone_cluster(local_platform: Settings, state: Path) -> Iterator[Settings]:
    """Settings whose jobs run on a standalone cluster with its state under ``state`` and
    free ports, up for the block; the jars are those ``make install`` fetched."""
    from core.spark import local_spark_jars
    from platformctl.process import port_open

    spark = local_platform.spark.model_copy(
        update={
            "cluster": "standalone",
            "master": f"spark://127.0.0.1:{(master := free_port())}",
            "master_port": master,
            "master_ui_port": free_port(),
            "worker_port": free_port(),
            "jars": local_spark_jars(local_platform.local.state_dir),
        }
    )
    local = local_platform.local.model_copy(update={"state_dir": state})
    settings = local_platform.model_copy(update={"spark": spark, "local": local})
    # Worker N listens on worker_port + N - 1 and shows its page on master_ui_port + N.
    wanted = (spark.worker_port + 1, spark.master_ui_port + 1, spark.master_ui_port + 2)
    taken = [port for port in wanted if port_open(port)]
    assert not taken, f"ports the cluster needs are in use: {taken}"
    platform.up(settings, platform.SPARK_CLUSTER, install_missing=False)
    try:
        yield settings
    finally:
        platform.down(settings, platform.SPARK_CLUSTER)


def on_cluster(cluster: Settings, settings: Settings) -> Settings:
    """A test's ``settings`` with its jobs submitted to ``cluster``."""
    return settings.model_copy(update={"spark": cluster.spark, "local": cluster.local})


def finished_applications(cluster: Settings, expected: str, timeout_s: float = 60) -> set[str]:
    """Names of the applications that ran on the cluster and ended (the master's page), once
    ``expected`` is among them or ``timeout_s`` passed: the master lists an application as
    ended a moment after its driver went away."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        page = httpx.get(f"http://127.0.0.1:{cluster.spark.master_ui_port}/json/", timeout=10)
        ended = {app["name"] for app in page.json()["completedapps"]}
        if expected in ended or time.monotonic() > deadline:
            return ended
        time.sleep(1)


def worker_pid(cluster: Settings, number: int) -> int:
    pid = platform.processes(cluster)[f"spark-worker-{number}"].pid()
    assert pid is not None, f"spark-worker-{number} is not running"
    return pid


def kill_node(cluster: Settings, number: int) -> list[int]:
    """SIGKILL worker ``number`` and its executors at once, as when its machine dies (a
    worker killed alone leaves its executors running until they notice). The pids killed."""
    import os
    import signal
    import subprocess

    worker = worker_pid(cluster, number)
    children = subprocess.run(["pgrep", "-P", str(worker)], capture_output=True, text=True)
    pids = [worker, *(int(pid) for pid in children.stdout.split())]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return pids
