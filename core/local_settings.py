"""The local section of the settings (``WAP_LOCAL__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own: the processes ``platformctl`` starts on this machine, and
the shape of its optional local clusters (three Kafka brokers, a Cassandra
ring). Ignored against real clusters.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["RING_ADDRESSES", "RING_HEAP_MB", "RING_REPLICATION", "LocalSettings"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]


RING_ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
"""The local Cassandra ring's nodes' addresses unless ``local.cassandra_ring_addresses`` says."""
RING_HEAP_MB = 1024
"""Heap of each node of the local Cassandra ring unless ``local.cassandra_heap_mb`` says."""
RING_REPLICATION: dict[str, str | int] = {"class": "SimpleStrategy", "replication_factor": 3}
"""The keyspace's replication on the local ring: every node holds every row, and a quorum
(2 of 3) is still there when one node is down."""


class LocalSettings(BaseModel):
    """Processes the platform control starts on this machine (ignored against clusters)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state_dir: Path = PROJECT_ROOT / ".platform"
    """All local state: jars, service data, logs, pid files."""
    java: str = "java"
    """Java 17 launcher used for Kafka and Cassandra."""
    kafka_controller_port: int = Field(default=9093, ge=1, le=65535)
    """KRaft controller listener of the local broker (of node 1 of a local cluster)."""
    kafka_heap_mb: int = Field(default=512, ge=256)
    """Heap of the local Kafka broker (of each node of a local cluster)."""
    kafka_nodes: int = Field(default=1, ge=1, le=3)
    """Local Kafka nodes: 1, or 3 for a cluster that survives losing one (each node broker
    and controller of a three-voter quorum, on ports 2 and 4 above node 1's:
    :mod:`core.local_kafka`). With 3, ``kafka.bootstrap_servers`` naming node 1 only lists
    all three, and replication 1 / min ISR 1 become 3 / 2 (:class:`Settings`)."""
    cassandra_storage_port: int = Field(default=7000, ge=1, le=65535)
    """Inter-node port of the local Cassandra."""
    cassandra_heap_mb: int = Field(default=2048, ge=512)
    """Heap of the local Cassandra. Every table holds heap of its own (metrics, memtable),
    about 0.4 MB, and a keyspace of the layout has ~50 tables: with a few keyspaces beside
    the platform's (tests, benchmarks), 1 GB held ~900 MB live and Cassandra ran a full GC
    every 30-60 s, spending a fifth of a core on concurrent marking. Unless set, a ring's
    nodes get 1024 MB each (:data:`RING_HEAP_MB`): they hold the platform's keyspace only."""
    cassandra_java_options: tuple[str, ...] = ()
    """JVM options added to each local Cassandra node's, e.g. :data:`core.spark.C1_ONLY`'s
    for nodes that live a few minutes (the ring a test brings up)."""
    cassandra_nodes: int = 1
    """Local Cassandra nodes: 1, or a ring of 3 (``cassandra``, ``cassandra-2`` and
    ``cassandra-3`` on ``cassandra_ring_addresses``) in which one node may die and every read
    and write still succeeds. With 3, ``cassandra.contact_points`` and
    ``cassandra.replication`` default to the ring's addresses and a replication factor of 3."""
    cassandra_ring_addresses: tuple[str, str, str] = RING_ADDRESSES
    """Where the ring's nodes listen, node N on the Nth, each on the native port
    ``cassandra.port`` and the storage port ``cassandra_storage_port``: loopback addresses,
    which Linux routes without setup (macOS: ``sudo ifconfig lo0 alias 127.0.0.2``). A single
    node listens on 127.0.0.1."""
    start_timeout_s: float = Field(default=180.0, gt=0)
    """How long ``up`` waits for a service to become healthy."""

    @model_validator(mode="after")
    def _check(self) -> LocalSettings:
        if self.kafka_nodes == 2:
            raise ValueError(
                "local.kafka_nodes=2: a KRaft quorum of two voters stops when either node "
                "dies, so it is no safer than one. Use 1, or 3 (WAP_LOCAL__KAFKA_NODES=3)."
            )

        if self.cassandra_nodes not in (1, 3):
            raise ValueError(
                f"local.cassandra_nodes={self.cassandra_nodes}: the local platform runs 1 "
                "Cassandra node or a ring of 3 (WAP_LOCAL__CASSANDRA_NODES=3)."
            )
        addresses = self.cassandra_ring_addresses
        for address in addresses:
            try:
                ipaddress.IPv4Address(address)
            except ValueError:
                raise ValueError(
                    f"local.cassandra_ring_addresses: {address!r} is not an IPv4 address; a "
                    "node listens on an address, e.g. 127.0.0.2 (any 127.x.y.z on Linux)."
                ) from None
        if len(set(addresses)) != len(addresses):
            raise ValueError(f"local.cassandra_ring_addresses repeats an address: {addresses}")
        if self.cassandra_nodes == 3 and "cassandra_heap_mb" not in self.model_fields_set:
            object.__setattr__(self, "cassandra_heap_mb", RING_HEAP_MB)
        return self
