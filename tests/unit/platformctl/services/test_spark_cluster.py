"""The local Spark standalone cluster's processes: argv, ports, secret and probes."""

from __future__ import annotations

import os
from pathlib import Path

from core.settings import LocalSettings, Settings, SparkSettings
from platformctl import platform
from platformctl.services import spark


def _settings(tmp_path: Path, cluster: str = "standalone") -> Settings:
    return Settings(
        local=LocalSettings(state_dir=tmp_path / "state"),
        spark=SparkSettings(cluster=cluster, master_port=17077, master_ui_port=18980),
    )


def test_a_master_and_two_workers_on_loopback_from_the_spark_pyspark_ships(tmp_path):
    settings = _settings(tmp_path)
    managed = platform.processes(settings)
    master, one, two = (managed[name] for name in platform.SPARK_CLUSTER)
    assert master.argv[master.argv.index("-cp") + 1] == f"{spark.spark_home() / 'jars'}/*"
    assert spark.MASTER_CLASS in master.argv and spark.WORKER_CLASS in one.argv
    assert master.ports == (17077, 18980)
    assert (one.ports, two.ports) == ((7078, 18981), (7079, 18982))
    assert one.argv[-1] == two.argv[-1] == "spark://127.0.0.1:17077"
    for process in (master, one, two):
        assert process.argv[process.argv.index("--host") + 1] == "127.0.0.1"
        assert process.env["SPARK_LOCAL_IP"] == "127.0.0.1"
    # Each worker's pid is told from the other's by its own work directory.
    assert one.marker != two.marker and one.marker in one.argv and two.marker in two.argv


def test_the_cluster_takes_orders_only_with_its_secret_which_no_command_line_shows(tmp_path):
    settings = _settings(tmp_path)
    secret = settings.spark.auth_secret.get_secret_value()
    for name in platform.SPARK_CLUSTER:
        process = platform.processes(settings)[name]
        assert process.env["_SPARK_AUTH_SECRET"] == secret
        assert secret not in " ".join(process.argv)
    conf = (tmp_path / "state" / "spark-cluster" / "conf" / "spark-daemons.conf").read_text()
    assert "spark.authenticate true" in conf and "spark.master.rest.enabled false" in conf
    assert secret not in conf
    mode = os.stat(tmp_path / "state" / "spark-cluster" / "conf" / "spark-daemons.conf").st_mode
    assert mode & 0o077 == 0


def test_only_a_standalone_setting_runs_the_cluster(tmp_path):
    records = {s.name: s for s in spark.SERVICES}
    assert all(records[n].runs_with(_settings(tmp_path)) for n in platform.SPARK_CLUSTER)
    assert not any(
        records[n].runs_with(_settings(tmp_path, "none")) for n in platform.SPARK_CLUSTER
    )
    # Not running and not asked for: status does not list the cluster's nodes.
    names = {s.name for s in platform.status(_settings(tmp_path, "none"))}
    assert not names & set(platform.SPARK_CLUSTER)


def test_probes_read_the_masters_status_page(monkeypatch, tmp_path):
    settings = _settings(tmp_path)
    page = spark.ClusterState(
        "ALIVE",
        [
            {"port": 7078, "state": "ALIVE", "cores": 4, "coresused": 1, "memory": 3072,
             "memoryused": 768},
            {"port": 7079, "state": "DEAD", "cores": 4, "coresused": 0, "memory": 3072,
             "memoryused": 0},
        ],
        [{"name": "speed", "cores": 1, "state": "RUNNING"}],
    )  # fmt: skip
    monkeypatch.setattr(spark, "cluster_state", lambda s: (page, ""))
    healthy, detail = spark.master_healthy(settings)
    assert healthy and detail == (
        "ALIVE: 1 workers alive, 1/4 cores used; applications: speed (1 cores)"
    )
    assert spark.worker_healthy(settings, 1) == (
        True,
        "ALIVE: 1/4 cores, 768/3072 MiB in executors",
    )
    assert spark.worker_healthy(settings, 2) == (False, "not registered with the master")
    monkeypatch.setattr(spark, "cluster_state", lambda s: (None, "nothing listening"))
    assert spark.master_healthy(settings) == (False, "nothing listening")
