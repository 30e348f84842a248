from __future__ import annotations

import pytest

from core.cassandra import replication_cql


def test_network_topology_replication():
    cql = replication_cql({"class": "NetworkTopologyStrategy", "eu-west": 3})
    assert cql == "{'class': 'NetworkTopologyStrategy', 'eu-west': '3'}"


@pytest.mark.parametrize(
    "replication",
    [
        {"replication_factor": 1},
        {"class": "SimpleStrategy", "x'; DROP": 1},
        {"class": "SimpleStrategy", "replication_factor": "1'}"},
    ],
)
def test_invalid_or_unsafe_replication_is_refused(replication):
    with pytest.raises(ValueError):
        replication_cql(replication)


def test_sessions_run_schema_changes_with_the_schema_timeout(monkeypatch):
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster

    from core.cassandra import SCHEMA_PROFILE, connect, ensure_keyspace
    from core.settings import CassandraSettings

    monkeypatch.setattr(Cluster, "connect", lambda self: self)  # no node needed
    settings = CassandraSettings(request_timeout_s=7, schema_timeout_s=95)
    cluster, _ = connect(settings)
    profiles = cluster.profile_manager.profiles
    assert profiles[EXEC_PROFILE_DEFAULT].request_timeout == 7
    assert profiles[SCHEMA_PROFILE].request_timeout == 95

    class Session:
        def __init__(self) -> None:
            self.calls: list[tuple[str, dict]] = []

        def execute(self, statement, **kwargs):
            self.calls.append((statement, kwargs))

    session = Session()
    ensure_keyspace(session, "ks", {"class": "SimpleStrategy", "replication_factor": 1})
    [(statement, kwargs)] = session.calls
    assert statement.startswith("CREATE KEYSPACE IF NOT EXISTS ks ")
    assert kwargs == {"execution_profile": SCHEMA_PROFILE}


@pytest.mark.parametrize("token_aware", [True, False])
def test_sessions_read_the_schema_only_to_route_by_token(monkeypatch, token_aware):
    from cassandra.cluster import Cluster

    from core.cassandra import connect
    from core.settings import CassandraSettings

    monkeypatch.setattr(Cluster, "connect", lambda self: self)  # no node needed
    cluster, _ = connect(CassandraSettings(token_aware=token_aware))
    assert cluster.schema_metadata_enabled is token_aware
    assert cluster.token_metadata_enabled is token_aware
    probe, _ = connect(CassandraSettings(token_aware=True), schema=False)
    assert not probe.schema_metadata_enabled and not probe.token_metadata_enabled
