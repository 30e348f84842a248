"""The local Cassandra's nodes as rendered for one node and for a ring of three (no JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.settings import CassandraSettings, LocalSettings, Settings
from platformctl import platform
from platformctl.process import ManagedProcess
from platformctl.services import cassandra
from tests.support.ports import free_port

RING_ADDRESSES = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


def _settings(tmp_path: Path, nodes: int = 1, **local: object) -> Settings:
    return Settings(
        local=LocalSettings(state_dir=tmp_path / "state", cassandra_nodes=nodes, **local),
        cassandra=CassandraSettings(port=19042),
    )


def _config(process: ManagedProcess) -> dict:
    return yaml.safe_load(Path(process.marker).read_text())


def _option(process: ManagedProcess, prefix: str) -> str | None:
    found = [arg for arg in process.argv if arg.startswith(prefix)]
    return found[0][len(prefix) :] if found else None


def test_a_single_node_listens_on_127_0_0_1_and_seeds_itself(tmp_path):
    settings = _settings(tmp_path)
    node = platform.processes(settings)["cassandra"]
    config = _config(node)
    assert (config["listen_address"], config["rpc_address"]) == ("127.0.0.1", "127.0.0.1")
    assert config["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.1:7000"
    assert (config["native_transport_port"], config["storage_port"]) == (19042, 7000)
    assert config["num_tokens"] == 16
    assert config["data_file_directories"] == [str(tmp_path / "state" / "cassandra" / "data/data")]
    assert node.host == "127.0.0.1" and node.ports == (19042, 7000)
    assert node.marker == str(tmp_path / "state" / "cassandra" / "conf" / "cassandra.yaml")
    # Its heap, its logs in the platform's folder, and no peers to tell it is going down.
    assert "-Xmx2048m" in node.argv and "-Xms2048m" in node.argv
    assert _option(node, "-Dcassandra.logdir=") == str(tmp_path / "state" / "logs")
    assert "-Dcassandra.shutdown_announce_in_ms=0" in node.argv
    assert "-Dcassandra.test.flush_local_schema_changes=false" in node.argv
    assert _option(node, "-Dcassandra.ring_delay_ms=") is None
    assert _option(node, "-Dcassandra.consistent.rangemovement=") is None


def test_a_ring_is_three_nodes_on_their_own_addresses_seeded_by_the_first(tmp_path):
    settings = _settings(tmp_path, 3, cassandra_ring_addresses=RING_ADDRESSES)
    managed = platform.processes(settings)
    nodes = [managed[name] for name in platform.CASSANDRA_RING]
    assert platform.CASSANDRA_RING == ("cassandra", "cassandra-2", "cassandra-3")
    for node, address in zip(nodes, RING_ADDRESSES, strict=True):
        config = _config(node)
        assert (config["listen_address"], config["rpc_address"]) == (address, address)
        assert config["seed_provider"][0]["parameters"][0]["seeds"] == "127.0.0.2:7000"
        # The same ports on every node: each has an address of its own.
        assert (config["native_transport_port"], config["storage_port"]) == (19042, 7000)
        assert node.host == address and node.ports == (19042, 7000)
        assert "-Xmx1024m" in node.argv  # the ring's heap per node unless set
        assert _option(node, "-Dcassandra.ring_delay_ms=") == str(cassandra.RING_DELAY_MS)
        # Nodes 2 and 3 of a new ring bootstrap together.
        assert _option(node, "-Dcassandra.consistent.rangemovement=") == "false"
        assert "-Dcassandra.shutdown_announce_in_ms=0" not in node.argv
        # A node killed before a schema flush would restart without the keyspace.
        assert _option(node, "-Dcassandra.test.flush_local_schema_changes=") is None
    # Node 1 is the single node's service: the same config, data and pid file.
    assert nodes[0].marker == str(tmp_path / "state" / "cassandra" / "conf" / "cassandra.yaml")
    for attribute in ("marker", "pid_file", "log_file"):
        assert len({getattr(node, attribute) for node in nodes}) == 3, attribute
    data = {tuple(_config(node)["data_file_directories"]) for node in nodes}
    commitlogs = {_config(node)["commitlog_directory"] for node in nodes}
    assert len(data) == len(commitlogs) == 3
    log_dirs = [_option(node, "-Dcassandra.logdir=") for node in nodes]
    logs = tmp_path / "state" / "logs"
    assert log_dirs == [str(logs), str(logs / "cassandra-2"), str(logs / "cassandra-3")]


def test_a_ring_node_heap_can_be_set(tmp_path):
    settings = _settings(tmp_path, 3, cassandra_heap_mb=768)
    assert all(
        "-Xmx768m" in platform.processes(settings)[name].argv for name in platform.CASSANDRA_RING
    )


def test_a_config_refuses_an_address_that_is_not_one(tmp_path):
    with pytest.raises(ValueError, match="address must be an IPv4 address, got 'localhost'"):
        cassandra.write_config(tmp_path, data_dir=tmp_path, address="localhost")


def test_the_keyspace_is_provisioned_once_the_last_node_is_up(tmp_path, monkeypatch):
    import core.cassandra

    def connect(*args, **kwargs):
        raise RuntimeError("provisioned")

    monkeypatch.setattr(core.cassandra, "connect", connect)
    joined: set[int] = set()
    monkeypatch.setattr(cassandra, "healthy", lambda settings, n: (n in joined, f"node {n}"))
    single = _settings(tmp_path)
    ring = _settings(tmp_path, 3).model_copy(
        update={"local": LocalSettings(cassandra_nodes=3, start_timeout_s=1)}
    )
    first, second, third = cassandra.SERVICES
    with pytest.raises(RuntimeError, match="provisioned"):
        first.provision(single)
    first.provision(ring)  # two nodes to come: nothing yet
    second.provision(ring)
    # Nodes 2 and 3 join together: the last one started waits for every node to be normal.
    joined.update({1, 3})
    with pytest.raises(TimeoutError, match=r"did not all join: .*cassandra-2: node 2"):
        third.provision(ring)
    joined.add(2)
    with pytest.raises(RuntimeError, match="provisioned"):
        third.provision(ring)


def test_a_ring_node_is_ready_for_the_next_to_start_once_it_listens_while_the_ring_forms(
    tmp_path, monkeypatch
):
    port = free_port()
    addresses = ("127.0.0.2", "127.0.0.1", "127.0.0.4")
    settings = _settings(tmp_path, 3, cassandra_ring_addresses=addresses).model_copy(
        update={
            "local": LocalSettings(
                cassandra_nodes=3, cassandra_ring_addresses=addresses, cassandra_storage_port=port
            )
        }
    )
    normal: set[int] = set()
    monkeypatch.setattr(cassandra, "healthy", lambda settings, n: (n in normal, f"node {n}"))
    second = cassandra.SERVICES[1]
    assert second.ready(settings) == (False, "node 2")  # nothing listens yet
    import socket

    with socket.create_server(("127.0.0.1", port)):
        assert second.ready(settings) == (True, f"listening to gossip on 127.0.0.1:{port}, joining")
        # Restarted in a ring whose third node works: it joins before up goes on.
        normal.update({1, 3})
        assert second.ready(settings) == (False, "node 2")
        normal.add(2)
        assert second.ready(settings) == (True, "node 2")


def test_a_ring_node_probe_says_where_nothing_listens(tmp_path):
    port = free_port()
    settings = _settings(tmp_path, 3, cassandra_ring_addresses=RING_ADDRESSES).model_copy(
        update={"cassandra": CassandraSettings(port=port)}
    )
    assert cassandra.healthy(settings, 2) == (False, f"nothing listening on 127.0.0.3:{port}")


def test_java_options_of_the_settings_come_after_cassandra_s_own(tmp_path):
    settings = _settings(tmp_path, 3, cassandra_java_options=("-XX:TieredStopAtLevel=1",))
    for node in ("cassandra", "cassandra-2", "cassandra-3"):
        argv = platform.processes(settings)[node].argv
        main = argv.index(cassandra.MAIN_CLASS)
        assert argv.index("-XX:TieredStopAtLevel=1") < main
        assert argv.index("-XX:TieredStopAtLevel=1") > argv.index("-XX:+UseG1GC")
    assert (
        "-XX:TieredStopAtLevel=1" not in platform.processes(_settings(tmp_path))["cassandra"].argv
    )
