"""The local Kafka's command lines and configs, one node or three (no JVM is started; the
integration tests check the ports and run the cluster)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from core.settings import KafkaSettings, LocalSettings, Settings
from platformctl.services import kafka

SINGLE_NODE = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "advertised.listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "controller.listener.names": "CONTROLLER",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "background.threads": "4",
    "num.replica.fetchers": "1",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "<data>",
    "num.recovery.threads.per.data.dir": "1",
    "auto.create.topics.enable": "false",
    "delete.topic.enable": "true",
    "num.partitions": "3",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "share.coordinator.state.topic.num.partitions": "10",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.hours": "168",
    "log.retention.bytes": "-1",
    "log.segment.bytes": "268435456",
    "log.retention.check.interval.ms": "300000",
    "log.cleaner.threads": "1",
    "log.cleaner.dedupe.buffer.size": "33554432",
}
"""Every setting of the single broker's ``server.properties`` as it was before clusters."""


def _properties(path: Path) -> dict[str, str]:
    lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def _settings(tmp_path: Path, nodes: int) -> Settings:
    return Settings(local=LocalSettings(state_dir=tmp_path / "state", kafka_nodes=nodes))


def test_the_broker_starts_no_jmx_connector(tmp_path: Path):
    properties = tmp_path / "server.properties"
    argv = kafka.server_command("java", tmp_path / "jars", properties, tmp_path, heap_mb=512)
    assert not [arg for arg in argv if "jmxremote" in arg or "rmi" in arg]
    assert argv[-2:] == [kafka.MAIN_CLASS, str(properties.resolve())]


def test_a_single_broker_s_config_is_what_it_was(tmp_path: Path):
    settings = _settings(tmp_path, 1)
    process = kafka.process(settings)
    data = (tmp_path / "state" / "kafka" / "data").resolve().as_posix()
    assert _properties(Path(process.marker)) == SINGLE_NODE | {"log.dirs": data}
    assert process.ports == (9092, 9093)
    assert process.pid_file == tmp_path / "state" / "run" / "kafka.pid"
    assert f"-Dkafka.logs.dir={(tmp_path / 'state' / 'logs').resolve()}" in process.argv


def test_three_nodes_are_voters_of_one_static_quorum_with_three_replicas(tmp_path: Path):
    settings = _settings(tmp_path, 3)
    voters = "1@127.0.0.1:9093,2@127.0.0.1:9095,3@127.0.0.1:9097"
    for node, name, port, controller_port in [
        (1, "kafka", 9092, 9093),
        (2, "kafka-2", 9094, 9095),
        (3, "kafka-3", 9096, 9097),
    ]:
        process = kafka.process(settings, node)
        assert (process.name, process.ports) == (name, (port, controller_port))
        config = _properties(Path(process.marker))
        home = (tmp_path / "state" / name).resolve()
        assert Path(process.marker) == home / "conf" / "server.properties"
        assert config["node.id"] == str(node)
        assert config["controller.quorum.voters"] == voters
        assert "controller.quorum.bootstrap.servers" not in config
        assert config["listeners"] == (
            f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
        )
        assert config["log.dirs"] == (home / "data").as_posix()
        replication = {key: value for key, value in config.items() if "replica" in key}
        replication |= {key: value for key, value in config.items() if key.endswith("min.isr")}
        assert replication == {
            "default.replication.factor": "3",
            "min.insync.replicas": "2",
            "num.replica.fetchers": "1",
            "offsets.topic.replication.factor": "3",
            "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2",
            "share.coordinator.state.topic.replication.factor": "3",
            "share.coordinator.state.topic.min.isr": "2",
        }
        # Each its own pid file and log folder (kafka.log and the GC log have fixed names).
        assert process.pid_file == tmp_path / "state" / "run" / f"{name}.pid"
        logs = tmp_path / "state" / "logs" / ("" if node == 1 else name)
        assert f"-Dkafka.logs.dir={logs.resolve()}" in process.argv
    # Apart from the node's own lines, the three configs are the same.
    configs = [_properties(Path(kafka.process(settings, node).marker)) for node in (1, 2, 3)]
    own = {"node.id", "listeners", "advertised.listeners", "log.dirs"}
    shared = [{k: v for k, v in config.items() if k not in own} for config in configs]
    assert shared[0] == shared[1] == shared[2]


def test_a_node_the_settings_do_not_run_is_looked_for_but_not_rendered(tmp_path: Path):
    process = kafka.process(_settings(tmp_path, 1), 3)
    assert process.name == "kafka-3" and process.ports == (9096, 9097)
    assert not (tmp_path / "state" / "kafka-3").exists()


def test_a_voter_list_must_name_the_node_itself(tmp_path: Path):
    with pytest.raises(ValueError, match="should map node_id 2"):
        kafka.write_config(
            tmp_path, data_dir=tmp_path, log_dir=tmp_path, port=9094, controller_port=9095,
            node_id=2, voters={1: 9093, 3: 9097},
        )  # fmt: skip


def test_the_cluster_s_nodes_are_formatted_with_one_kept_id(tmp_path: Path, monkeypatch):
    settings = _settings(tmp_path, 3)
    formats: list[list[str]] = []

    def run(argv, **_):
        formats.append(argv)
        config = _properties(Path(argv[argv.index("--config") + 1]))
        cluster = argv[argv.index("--cluster-id") + 1]
        meta = Path(config["log.dirs"]) / "meta.properties"
        meta.parent.mkdir(parents=True)
        meta.write_text(f"node.id={config['node.id']}\ncluster.id={cluster}\n")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(kafka.subprocess, "run", run)
    for service in kafka.SERVICES:
        service.prepare(settings)
    assert len(formats) == 3
    ids = {argv[argv.index("--cluster-id") + 1] for argv in formats}
    assert ids == {kafka.cluster_id(settings)}
    assert not [argv for argv in formats if "--standalone" in argv]
    for node in (1, 2, 3):
        data = tmp_path / "state" / kafka.node_name(node) / "data"
        assert kafka.formatted_cluster_id(data) == kafka.cluster_id(settings)

    # Formatted once: a later up (or a restarted node) formats nothing again.
    for service in kafka.SERVICES:
        service.prepare(settings)
    assert len(formats) == 3
    assert (tmp_path / "state" / "kafka-cluster.id").read_text().strip() in ids


def test_a_single_broker_is_formatted_standalone(tmp_path: Path, monkeypatch):
    formats: list[list[str]] = []
    monkeypatch.setattr(
        kafka.subprocess,
        "run",
        lambda argv, **_: formats.append(argv) or subprocess.CompletedProcess(argv, 0, "", ""),
    )
    kafka.SERVICE.prepare(_settings(tmp_path, 1))
    assert formats[0][-3] == "--cluster-id" and len(formats[0][-2]) == 22
    assert formats[0][-1] == "--standalone"
    assert not (tmp_path / "state" / "kafka-cluster.id").exists()


def _formatted(data: Path, cluster: str) -> None:
    data.mkdir(parents=True)
    (data / "meta.properties").write_text(f"version=1\nnode.id=1\ncluster.id={cluster}\n")


def test_a_single_broker_s_log_is_not_taken_into_a_cluster(tmp_path: Path):
    _formatted(tmp_path / "state" / "kafka" / "data", "AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(RuntimeError, match="nodes of a cluster are formatted together"):
        kafka.SERVICE.prepare(_settings(tmp_path, 3))


def test_node_one_of_a_cluster_does_not_run_alone(tmp_path: Path):
    cluster = kafka.cluster_id(_settings(tmp_path, 3))
    _formatted(tmp_path / "state" / "kafka" / "data", cluster)
    kafka.SERVICE.prepare(_settings(tmp_path, 3))  # its own cluster: nothing to do
    with pytest.raises(RuntimeError, match="WAP_LOCAL__KAFKA_NODES=3"):
        kafka.SERVICE.prepare(_settings(tmp_path, 1))


def test_probes_ask_the_node_itself(tmp_path: Path, monkeypatch):
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:41000"),
        local=LocalSettings(state_dir=tmp_path, kafka_nodes=3, kafka_controller_port=41001),
    )
    monkeypatch.setattr(kafka, "port_open", lambda port, host="127.0.0.1": False)
    assert kafka.healthy(settings, node=3) == (False, "nothing listening on 127.0.0.1:41004")
    # A cold start: no node answers, node 1's controller listens: up goes on to node 2.
    monkeypatch.setattr(kafka, "port_open", lambda port, host="127.0.0.1": port == 41001)
    assert kafka.SERVICE.ready(settings) == (
        True,
        "controller listening on 127.0.0.1:41001, no quorum yet",
    )
