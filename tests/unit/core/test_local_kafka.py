"""A local three-node Kafka: the settings the apps get follow the nodes platformctl runs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.local_kafka import cluster_bootstrap_servers, node_ports
from core.settings import KafkaSettings, LocalSettings, Settings, load_settings, settings_env


def _cluster(**kafka: object) -> Settings:
    return Settings(kafka=KafkaSettings(**kafka), local=LocalSettings(kafka_nodes=3))


def test_one_node_leaves_the_kafka_settings_as_they_are():
    settings = Settings(local=LocalSettings(kafka_nodes=1))
    assert settings.kafka == KafkaSettings()
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert (settings.kafka.replication_factor, settings.kafka.min_insync_replicas) == (1, 1)


def test_three_nodes_take_six_ports_from_node_one_s():
    ports = [node_ports(9092, 9093, node) for node in (1, 2, 3)]
    assert ports == [(9092, 9093), (9094, 9095), (9096, 9097)]
    assert node_ports(30000, 30001, 2) == (30002, 30003)
    with pytest.raises(ValueError, match="numbered from 1"):
        node_ports(9092, 9093, 0)


def test_three_nodes_give_the_apps_every_broker_three_replicas_and_two_in_sync():
    kafka = _cluster().kafka
    assert kafka.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    assert (kafka.replication_factor, kafka.min_insync_replicas) == (3, 2)
    # Clients of every kind get the three addresses.
    assert kafka.client_config()["bootstrap.servers"] == kafka.bootstrap_servers
    assert kafka.spark_options()["kafka.bootstrap.servers"] == kafka.bootstrap_servers


def test_node_one_s_own_ports_move_the_whole_cluster():
    settings = Settings(
        kafka=KafkaSettings(bootstrap_servers="127.0.0.1:41000", events_topic="mine"),
        local=LocalSettings(kafka_nodes=3, kafka_controller_port=41001),
    )
    assert settings.kafka.bootstrap_servers == "127.0.0.1:41000,127.0.0.1:41002,127.0.0.1:41004"
    assert settings.kafka.events_topic == "mine"  # the rest of the section is kept


def test_values_other_than_the_single_node_defaults_are_kept():
    kafka = _cluster(replication_factor=2).kafka
    assert (kafka.replication_factor, kafka.min_insync_replicas) == (2, 1)
    kafka = _cluster(min_insync_replicas=3, replication_factor=3).kafka
    assert kafka.min_insync_replicas == 3
    # The three derived addresses, given in full, are accepted as they are.
    full = "127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096"
    assert _cluster(bootstrap_servers=full).kafka.bootstrap_servers == full


def test_what_three_local_nodes_cannot_be_is_refused_with_the_fix():
    with pytest.raises(ValidationError, match="Name only node 1"):
        _cluster(bootstrap_servers="127.0.0.1:9092,127.0.0.1:9999")
    with pytest.raises(ValidationError, match="exceeds the 3 local Kafka nodes"):
        _cluster(replication_factor=5, min_insync_replicas=2)
    with pytest.raises(ValidationError, match="ports must be distinct"):
        Settings(local=LocalSettings(kafka_nodes=3, kafka_controller_port=9094))
    with pytest.raises(ValidationError, match="quorum of two voters"):
        LocalSettings(kafka_nodes=2)
    with pytest.raises(ValidationError):
        LocalSettings(kafka_nodes=4)
    with pytest.raises(ValueError, match="at most 65535"):
        cluster_bootstrap_servers("127.0.0.1:65533", 65534, 3)


def test_the_environment_variable_and_a_child_process_s_copy(monkeypatch):
    for key in list(__import__("os").environ):
        if key.startswith("WAP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("WAP_LOCAL__KAFKA_NODES", "3")
    settings = load_settings()
    assert settings.kafka.replication_factor == 3
    # A child process gets the derived section and derives nothing more from it.
    monkeypatch.delenv("WAP_LOCAL__KAFKA_NODES")
    for key, value in settings_env(settings).items():
        monkeypatch.setenv(key, value)
    assert load_settings().kafka == settings.kafka
