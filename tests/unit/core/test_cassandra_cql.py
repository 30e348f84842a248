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
