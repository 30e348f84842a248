"""A local Kafka cluster (``local.kafka_nodes=3``): where its nodes listen, what the apps use.

One port scheme, :func:`node_ports`: the settings derive from it the addresses
the apps connect to (:func:`cluster_kafka`) and ``platformctl`` the ports each
node binds, so the two cannot disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.settings import KafkaSettings

__all__ = ["PORT_STEP", "cluster_bootstrap_servers", "cluster_kafka", "node_ports"]

PORT_STEP = 2
"""How far apart two nodes' ports are. With the default broker port 9092 and controller
port 9093 the three nodes take the block 9092-9097 and nothing else."""


def node_ports(broker_port: int, controller_port: int, node: int) -> tuple[int, int]:
    """(broker port, controller port) of node ``node`` (1-based) of a local cluster.

    Node 1 listens on the configured ports; node *n* on both plus ``2 * (n - 1)``.

    >>> node_ports(9092, 9093, 1), node_ports(9092, 9093, 3)
    ((9092, 9093), (9096, 9097))
    """
    if node < 1:
        raise ValueError(f"Kafka nodes are numbered from 1, got {node}")
    step = PORT_STEP * (node - 1)
    return broker_port + step, controller_port + step


def cluster_bootstrap_servers(first: str, controller_port: int, nodes: int) -> str:
    """The ``host:port`` of every node's broker, given the first node's (``first``).

    Refuses a scheme whose ports collide (a broker port equal to another node's
    controller port) or leave the TCP range, naming the ports to change.

    >>> cluster_bootstrap_servers("127.0.0.1:9092", 9093, 3)
    '127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096'
    """
    host, _, port = first.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"kafka.bootstrap_servers should start with host:port, got {first!r}")
    ports = [node_ports(int(port), controller_port, node) for node in range(1, nodes + 1)]
    flat = [p for pair in ports for p in pair]
    if len(set(flat)) != len(flat) or max(flat) > 65535:
        raise ValueError(
            f"A local cluster of {nodes} Kafka nodes from broker port {port} and controller "
            f"port {controller_port} would listen on {flat}: ports must be distinct and at most "
            "65535. Put the controller port next to the broker port (9092 and 9093: the "
            "cluster takes 9092-9097) with WAP_LOCAL__KAFKA_CONTROLLER_PORT."
        )
    return ",".join(f"{host}:{broker}" for broker, _ in ports)


def cluster_kafka(kafka: KafkaSettings, nodes: int, controller_port: int) -> KafkaSettings:
    """``kafka`` as the apps need it against a local cluster of ``nodes`` nodes.

    A bootstrap list naming only node 1 gets the other nodes' brokers; single-node
    replication (1, min ISR 1) becomes one replica per node and half of the replicas
    in sync, rounded up (3 and 2), so a write acknowledged with ``acks=all`` is on
    two nodes and the topics still take writes with one node down. Values set to
    anything else are kept. A bootstrap list naming other brokers is refused: the
    apps would talk to brokers that ``platformctl`` does not run.
    """
    servers = [s.strip() for s in kafka.bootstrap_servers.split(",") if s.strip()]
    derived = cluster_bootstrap_servers(servers[0], controller_port, nodes)
    if len(servers) > 1 and ",".join(servers) != derived:
        raise ValueError(
            f"local.kafka_nodes={nodes} runs brokers at {derived}, but "
            f"kafka.bootstrap_servers={kafka.bootstrap_servers!r}. Name only node 1 "
            "(WAP_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:9092): the others are derived."
        )
    replicas = kafka.replication_factor if kafka.replication_factor != 1 else nodes
    if replicas > nodes:
        raise ValueError(
            f"kafka.replication_factor={replicas} exceeds the {nodes} local Kafka nodes: "
            "topics could not be created. Lower it, or leave it unset to get one per node."
        )
    in_sync = kafka.min_insync_replicas if kafka.min_insync_replicas != 1 else (replicas + 1) // 2
    return type(kafka).model_validate(
        kafka.model_dump()
        | {
            "bootstrap_servers": derived,
            "replication_factor": replicas,
            "min_insync_replicas": in_sync,
        }
    )
