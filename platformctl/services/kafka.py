"""Local Apache Kafka 4.4 (KRaft, broker + controller) from Maven Central jars: one node, or three.

The jars come from ``infra/local/maven/kafka/pom.xml`` (``kafka_2.13`` and its
runtime dependencies plus the log4j2 slf4j binding, copied into one
directory); there is no Kafka tarball and no ``bin/`` scripts.  This module
replaces the parts of ``kafka-storage.sh``, ``kafka-server-start.sh`` and
``kafka-run-class.sh`` that matter here:

* :func:`write_config` renders ``server.properties`` from
  ``infra/local/kafka/server.properties.tmpl`` and copies ``log4j2.yaml``
  next to it;
* :func:`format_command` builds the argv of ``kafka.tools.StorageTool format``
  (``--standalone`` for a single node), to run once while :func:`is_formatted`
  is false (the data dir has no ``meta.properties`` yet);
* :func:`server_command` builds the argv that runs ``kafka.Kafka`` in the
  foreground with the JVM flags of ``kafka-run-class.sh``.

These are plain functions: no environment variables are read and no process
is started.  :data:`SERVICES` puts them to work for ``platformctl``, one
record per node: the node's process under the state directory, the format
before its first start, a metadata probe, and the platform's topics once the
cluster is healthy.  On SIGTERM a broker shuts down cleanly (writes
``.kafka_cleanshutdown`` in the data dir) and the JVM exits with status 143,
which is the normal outcome.

With ``local.kafka_nodes=3`` the nodes ``kafka``, ``kafka-2`` and ``kafka-3``
are the voters of a static KRaft quorum (``controller.quorum.voters``), their
data dirs formatted with one cluster id kept in the state directory; topics
get three replicas, two in sync.  Node *n* listens on node 1's ports plus
``2 * (n - 1)`` (:func:`node_ports`).
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from string import Template
from typing import Any

from core import local_kafka
from core.log import get_logger, log_event
from core.settings import Settings
from platformctl.install import install_jars, jars_dir
from platformctl.process import ManagedProcess, ServiceStartError, port_open
from platformctl.services.base import Service, jvm_process, logs_dir

__all__ = [
    "DEFAULT_HEAP_MB",
    "MAIN_CLASS",
    "NAMES",
    "SERVICE",
    "SERVICES",
    "STORAGE_TOOL_CLASS",
    "TEMPLATE_DIR",
    "cluster_id",
    "format_command",
    "formatted_cluster_id",
    "healthy",
    "is_formatted",
    "node_name",
    "node_ports",
    "process",
    "random_cluster_id",
    "server_command",
    "write_config",
]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "infra/local/kafka"
MAIN_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
# kafka-server-start.sh uses 1 GiB; 512 MiB is ample for a dev broker.
DEFAULT_HEAP_MB = 512
NAMES = ("kafka", "kafka-2", "kafka-3")
"""The services of a local cluster's nodes, node 1 first; a single broker is ``kafka``."""
_log = get_logger(__name__)

_STANDALONE_QUORUM = """\
# Dynamic KRaft quorum of one voter; the data dir is formatted with
# `kafka-storage format --standalone` (so controller.quorum.voters must NOT be set).
controller.quorum.bootstrap.servers=127.0.0.1:{controller_port}"""

_STATIC_QUORUM = """\
# Static KRaft quorum of every node of the cluster: a majority of them must run for any
# to work. Each data dir is formatted with the cluster's one id and without --standalone
# (so controller.quorum.bootstrap.servers must NOT be set).
controller.quorum.voters={voters}"""

# KAFKA_JVM_PERFORMANCE_OPTS from kafka-run-class.sh, flag for flag. Not its KAFKA_JMX_OPTS:
# -Dcom.sun.management.jmxremote starts a JMX connector without authentication on a port
# of every interface. Without it no JMX port listens; jcmd, jconsole and VisualVM still
# attach by pid (the JDK's attach mechanism: only the broker's own OS user).
_JVM_OPTS = [
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
]  # fmt: skip


def _log_and_classpath(jars_dir: Path, conf_dir: Path, log_dir: Path) -> list[str]:
    return [
        f"-Dkafka.logs.dir={Path(log_dir).resolve()}",
        f"-Dlog4j2.configurationFile={Path(conf_dir).resolve() / 'log4j2.yaml'}",
        "-cp", f"{Path(jars_dir).resolve()}/*",
    ]  # fmt: skip


def write_config(
    conf_dir: Path,
    *,
    data_dir: Path,
    log_dir: Path,
    port: int,
    controller_port: int,
    node_id: int = 1,
    voters: Mapping[int, int] | None = None,
) -> Path:
    """Render ``server.properties`` and copy ``log4j2.yaml`` into *conf_dir*.

    The broker listens on ``127.0.0.1:port`` (PLAINTEXT) and its controller on
    ``127.0.0.1:controller_port``; partition and metadata logs live in
    *data_dir*.  Without *voters* the node is the one voter of a dynamic
    quorum and topics have one replica.  With *voters* (node id -> controller
    port of every node of a cluster, this one included) it is a voter of that
    static quorum, and topics default to one replica per node with half of
    them in sync, rounded up: 3 and 2 for three nodes, so an acknowledged
    write is on two nodes.  Creates *conf_dir* and *log_dir* (log4j2 writes
    ``kafka.log`` there) and overwrites earlier files.  Returns the path of
    the written ``server.properties``.
    """
    for name, value in (("port", port), ("controller_port", controller_port)):
        if not 0 < value < 65536:
            raise ValueError(f"{name} out of range: {value}")
    if port == controller_port:
        raise ValueError("port and controller_port must differ")
    if node_id < 0:
        raise ValueError(f"node_id must be >= 0, got {node_id}")
    if voters is not None and voters.get(node_id) != controller_port:
        raise ValueError(
            f"voters {dict(voters)} should map node_id {node_id} to its controller_port "
            f"{controller_port}"
        )
    replicas = len(voters) if voters else 1
    template = Template((TEMPLATE_DIR / "server.properties.tmpl").read_text())
    text = template.substitute(
        node_id=node_id,
        port=port,
        controller_port=controller_port,
        data_dir=Path(data_dir).resolve().as_posix(),
        quorum=_quorum(controller_port, voters),
        replication_factor=replicas,
        min_insync_replicas=(replicas + 1) // 2,
    )
    conf_dir = Path(conf_dir)
    conf_dir.mkdir(parents=True, exist_ok=True)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATE_DIR / "log4j2.yaml", conf_dir / "log4j2.yaml")
    properties = conf_dir / "server.properties"
    properties.write_text(text)
    return properties


def _quorum(controller_port: int, voters: Mapping[int, int] | None) -> str:
    """The lines of ``server.properties`` that say who votes in the KRaft quorum."""
    if not voters:
        return _STANDALONE_QUORUM.format(controller_port=controller_port)
    listed = ",".join(f"{node}@127.0.0.1:{port}" for node, port in sorted(voters.items()))
    return _STATIC_QUORUM.format(voters=listed)


def is_formatted(data_dir: Path) -> bool:
    """True once ``StorageTool format`` has written ``meta.properties`` in *data_dir*."""
    return (Path(data_dir) / "meta.properties").is_file()


def random_cluster_id() -> str:
    """A new cluster id as ``kafka-storage random-uuid`` prints it (22-char base64url)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):  # Kafka's Uuid.randomUuid() avoids these too
            return text


def format_command(
    java: str,
    jars_dir: Path,
    server_properties: Path,
    cluster_id: str,
    log_dir: Path,
    *,
    standalone: bool = True,
) -> list[str]:
    """Return the argv that formats the data dir named in *server_properties*.

    ``--standalone`` makes this node the only voter of a dynamic KRaft quorum
    (``controller.quorum.bootstrap.servers`` is set, ``controller.quorum.voters``
    is not).  Without it (*standalone* false) the voters are the static
    ``controller.quorum.voters`` of the config, and every node of the cluster
    must be formatted with the same *cluster_id*.  Run it only while
    :func:`is_formatted` is false: on a formatted dir it exits with status 1
    and changes nothing.  Uses ``kafka-run-class.sh``'s default tool heap
    (256 MiB).
    """
    if len(cluster_id) != 22:
        raise ValueError(f"cluster_id should be 22 base64url chars, got {cluster_id!r}")
    server_properties = Path(server_properties).resolve()
    return [
        java, "-Xmx256m", *_JVM_OPTS,
        *_log_and_classpath(jars_dir, server_properties.parent, log_dir),
        STORAGE_TOOL_CLASS, "format", "--config", str(server_properties),
        "--cluster-id", cluster_id, *(["--standalone"] if standalone else []),
    ]  # fmt: skip


def server_command(
    java: str, jars_dir: Path, server_properties: Path, log_dir: Path, heap_mb: int
) -> list[str]:
    """Return the argv that runs the broker (``kafka.Kafka``) in the foreground.

    *server_properties* is the result of :func:`write_config` (its folder also
    holds ``log4j2.yaml``).  The heap is fixed at *heap_mb* (``-Xms`` = ``-Xmx``,
    as ``kafka-server-start.sh`` does).  GC logging follows ``-loggc`` but
    rotates 3 x 10 MB instead of 10 x 100 MB.
    """
    if not 256 <= heap_mb <= 8192:
        raise ValueError(f"heap_mb should be 256..8192, got {heap_mb}")
    server_properties = Path(server_properties).resolve()
    gc_log = Path(log_dir).resolve() / "kafka-gc.log"
    return [
        java, f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m", *_JVM_OPTS,
        f"-Xlog:gc*:file={gc_log}:time,tags:filecount=3,filesize=10M",
        *_log_and_classpath(jars_dir, server_properties.parent, log_dir),
        MAIN_CLASS, str(server_properties),
    ]  # fmt: skip


def _host_port(settings: Settings) -> tuple[str, int]:
    host, _, port = settings.kafka.bootstrap_servers.split(",")[0].rpartition(":")
    return host or "127.0.0.1", int(port)


def node_name(node: int) -> str:
    """The service (and pid file, and log) name of node ``node``: ``kafka`` for node 1."""
    return NAMES[node - 1]


def node_ports(settings: Settings, node: int = 1) -> tuple[int, int]:
    """(broker port, controller port) of node ``node``: node 1's are the settings' (the first
    of ``kafka.bootstrap_servers``, ``local.kafka_controller_port``), the others follow
    :func:`core.local_kafka.node_ports`."""
    return local_kafka.node_ports(
        _host_port(settings)[1], settings.local.kafka_controller_port, node
    )


def _nodes(settings: Settings) -> range:
    return range(1, settings.local.kafka_nodes + 1)


def _runs(settings: Settings, node: int) -> bool:
    """Whether these settings run node ``node``."""
    return node <= settings.local.kafka_nodes


def _home(settings: Settings, node: int) -> Path:
    """Config and data of a node: ``<state>/kafka`` for node 1 (the single broker's too)."""
    return settings.local.state_dir / node_name(node)


def _log_dir(settings: Settings, node: int) -> Path:
    """Where a node's JVM writes ``kafka.log`` and its GC log: node 1 where a single broker
    does, the others in a folder each (the file names are fixed)."""
    return logs_dir(settings) if node == 1 else logs_dir(settings) / node_name(node)


def _config(settings: Settings, node: int) -> Path:
    """``server.properties`` of a local node, rendered under the state directory."""
    home = _home(settings, node)
    port, controller_port = node_ports(settings, node)
    voters = None
    if settings.local.kafka_nodes > 1:
        voters = {n: node_ports(settings, n)[1] for n in _nodes(settings)}
    return write_config(
        home / "conf",
        data_dir=home / "data",
        log_dir=_log_dir(settings, node),
        port=port,
        controller_port=controller_port,
        node_id=node,
        voters=voters,
    )


def process(settings: Settings, node: int = 1) -> ManagedProcess:
    """A local node, with its config rendered under the state directory (only for a node
    these settings run: another is only looked for, by ``down`` and ``status``)."""
    if _runs(settings, node):
        server_properties = _config(settings, node)
    else:
        server_properties = _home(settings, node) / "conf" / "server.properties"
    argv = server_command(
        settings.local.java,
        jars_dir(settings, "kafka"),
        server_properties,
        _log_dir(settings, node),
        settings.local.kafka_heap_mb,
    )
    ports = node_ports(settings, node)
    return jvm_process(settings, node_name(node), argv, server_properties, ports)


def _cluster_id_file(settings: Settings) -> Path:
    return settings.local.state_dir / "kafka-cluster.id"


def cluster_id(settings: Settings) -> str:
    """The id every node of the local cluster is formatted with, made once and kept in the
    state directory: a node formatted later (a later ``up``, a lost data dir) joins the
    same cluster."""
    path = _cluster_id_file(settings)
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(random_cluster_id() + "\n")
    return path.read_text().strip()


def formatted_cluster_id(data_dir: Path) -> str | None:
    """The cluster id a data dir was formatted with (``meta.properties``), or None."""
    if not is_formatted(data_dir):
        return None
    for line in (Path(data_dir) / "meta.properties").read_text().splitlines():
        if line.startswith("cluster.id="):
            return line.partition("=")[2].strip()
    return None


def _check_formatted(settings: Settings, node: int, data_dir: Path) -> None:
    """Refuse a data dir formatted for the other kind of quorum: a single broker's log cannot
    join a cluster's static quorum, and a cluster's node 1 alone has no quorum."""
    found = formatted_cluster_id(data_dir)
    id_file = _cluster_id_file(settings)
    ours = id_file.read_text().strip() if id_file.exists() else None
    if settings.local.kafka_nodes > 1 and found != ours:
        raise RuntimeError(
            f"{data_dir} holds the log of another Kafka (cluster id {found}; a single broker "
            f"run before local.kafka_nodes={settings.local.kafka_nodes}?), and the nodes of a "
            "cluster are formatted together. Run `platformctl down kafka`, then delete "
            f"{data_dir.parent} (its topics go with it), or use another WAP_LOCAL__STATE_DIR, "
            "or keep WAP_LOCAL__KAFKA_NODES=1."
        )
    if settings.local.kafka_nodes == 1 and ours is not None and found == ours:
        raise RuntimeError(
            f"{data_dir} holds node {node} of a three-node cluster (cluster id {found}), "
            "which alone has no quorum. Set WAP_LOCAL__KAFKA_NODES=3, or delete "
            f"{data_dir.parent} and {id_file} to run a single broker again."
        )


def _format_once(settings: Settings, *, node: int = 1) -> None:
    """Format the storage of a node that never ran (KRaft needs it before the first start):
    a single broker with an id of its own, a cluster's nodes with the cluster's."""
    data_dir = _home(settings, node) / "data"
    if is_formatted(data_dir):
        _check_formatted(settings, node, data_dir)
        return
    clustered = settings.local.kafka_nodes > 1
    argv = format_command(
        settings.local.java,
        jars_dir(settings, "kafka"),
        _config(settings, node),
        cluster_id(settings) if clustered else random_cluster_id(),
        _log_dir(settings, node),
        standalone=not clustered,
    )
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"Formatting Kafka storage failed:\n{result.stdout}{result.stderr}")


def _metadata(settings: Settings, bootstrap: str, timeout_s: float) -> Any:
    """A metadata answer of the cluster, asked of the brokers in ``bootstrap``."""
    from confluent_kafka.admin import AdminClient

    config = settings.kafka.client_config() | {"bootstrap.servers": bootstrap, "log_level": 0}
    return AdminClient(config).list_topics(timeout=timeout_s)


def healthy(settings: Settings, timeout_s: float = 3.0, *, node: int = 1) -> tuple[bool, str]:
    """Probe: the node's broker answers a metadata request itself; the detail says how many
    brokers the metadata lists (of how many nodes, in a cluster)."""
    host, port = _host_port(settings)[0], node_ports(settings, node)[0]
    if not port_open(port, host):
        return False, f"nothing listening on {host}:{port}"
    try:
        metadata = _metadata(settings, f"{host}:{port}", timeout_s)
    except Exception as exc:  # KafkaException: the broker is not ready yet
        return False, f"metadata request failed: {exc}"
    nodes = settings.local.kafka_nodes
    brokers = f"{len(metadata.brokers)} of {nodes}" if nodes > 1 else str(len(metadata.brokers))
    return True, f"{brokers} broker(s), {len(metadata.topics)} topic(s)"


def _ready(settings: Settings, *, node: int = 1) -> tuple[bool, str]:
    """What ``up`` waits for after starting a node: that it answers; or, while no other node
    answers either, that its controller listens. ``up`` starts the nodes one after the
    other, and a voter of a three-node quorum cannot answer before a second one runs."""
    answers, detail = healthy(settings, node=node)
    if answers or settings.local.kafka_nodes == 1:
        return answers, detail
    if any(healthy(settings, 1.0, node=other)[0] for other in _nodes(settings) if other != node):
        return False, detail  # the cluster works: this node has to join it
    host, controller_port = _host_port(settings)[0], node_ports(settings, node)[1]
    if port_open(controller_port, host):
        return True, f"controller listening on {host}:{controller_port}, no quorum yet"
    return False, detail


def _broker_count(settings: Settings, timeout_s: float = 3.0) -> int:
    """How many brokers the cluster's metadata lists (0 while a node's port is closed)."""
    host = _host_port(settings)[0]
    ports = [node_ports(settings, node)[0] for node in _nodes(settings)]
    if not all(port_open(port, host) for port in ports):
        return 0
    try:
        return len(_metadata(settings, settings.kafka.bootstrap_servers, timeout_s).brokers)
    except Exception:  # KafkaException: no quorum yet
        return 0


def _wait_for_brokers(settings: Settings) -> None:
    """Wait until the metadata lists every node's broker (a topic with three replicas cannot
    be created before three brokers registered)."""
    nodes = settings.local.kafka_nodes
    deadline = time.monotonic() + settings.local.start_timeout_s
    while (seen := _broker_count(settings)) < nodes:
        if time.monotonic() > deadline:
            raise ServiceStartError(
                f"Only {seen} of {nodes} Kafka brokers registered within "
                f"{settings.local.start_timeout_s:.0f}s; see `platformctl logs kafka-cluster` "
                f"and the kafka.log files under {logs_dir(settings)}."
            )
        time.sleep(0.5)


def _provision(settings: Settings, *, node: int = 1) -> None:
    """The platform's topics and every declared pipeline's, before anything produces to them
    (the declarations checked whole first: nothing is half-deployed).

    Once every node's broker is in the metadata: the last node of the cluster waits for
    that; another node provisions only if it is so already (``up`` of a running
    cluster), and otherwise leaves it to the last.
    """
    if node == settings.local.kafka_nodes:
        _wait_for_brokers(settings)
    elif _broker_count(settings) < settings.local.kafka_nodes:
        log_event(
            _log, "kafka.provision_deferred", node=node, until=node_name(len(_nodes(settings)))
        )
        return
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, project_topics
    from pipelines import validate_all

    topics = project_topics(settings.kafka, validate_all(), settings.access.audit_retention_days)
    created = ensure_topics(AdminClient(settings.kafka.client_config()), topics)
    log_event(_log, "kafka.provisioned", topics_created=created, node=node)


_INSTALL = partial(install_jars, component="kafka")
"""One install step for every node: ``up`` runs each distinct one once."""


def _node_service(node: int) -> Service:
    return Service(
        name=node_name(node),
        process=partial(process, node=node),
        probe=partial(healthy, node=node),
        install=_INSTALL,
        prepare=partial(_format_once, node=node),
        provision=partial(_provision, node=node),
        enabled=None if node == 1 else partial(_runs, node=node),
        ready=partial(_ready, node=node),
        quorum="kafka",
    )


SERVICES = tuple(_node_service(node) for node in range(1, len(NAMES) + 1))
"""``kafka`` (the single broker, or node 1), then ``kafka-2`` and ``kafka-3``, which run only
with ``local.kafka_nodes=3``."""
SERVICE = SERVICES[0]
