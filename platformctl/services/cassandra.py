"""Local Apache Cassandra 5.0 built from Maven Central jars: one node, or a ring of three.

The jars come from ``infra/local/maven/cassandra/pom.xml`` (``cassandra-all``
and its runtime dependencies, copied into one directory); there is no
Cassandra tarball and no ``bin/cassandra`` script.  This module replaces the
parts of that script that matter here:

* :func:`write_config` renders ``cassandra.yaml`` from
  ``infra/local/cassandra/cassandra.yaml.tmpl`` and copies ``logback.xml``
  next to it;
* :func:`server_command` builds the ``java`` argv that runs
  ``org.apache.cassandra.service.CassandraDaemon`` in the foreground with the
  JVM flags of Cassandra 5.0's ``conf/jvm-server.options`` and
  ``conf/jvm17-server.options``.

Both are plain functions: no environment variables are read and no process
is started.  :data:`SERVICES` puts them to work for ``platformctl``: each
node's process under the state directory, a CQL probe, and the platform's
keyspace and tables once the last node is healthy.  SIGTERM runs Cassandra's
own drain-on-shutdown hook.

With ``local.cassandra_nodes=3`` the platform runs a ring: ``cassandra`` (the
single node's service, the seed), then ``cassandra-2`` and ``cassandra-3``,
each on an address of its own (``local.cassandra_ring_addresses``, 127.0.0.1-3)
with the same ports.  The two join together once the seed is up: a new ring
holds no rows to stream, so the rule that nodes bootstrap one at a time (which
keeps the replicas of rows already written consistent) is lifted for them
(``cassandra.consistent.rangemovement=false``).  The keyspace
then keeps three replicas of every row (:data:`core.settings.RING_REPLICATION`),
so ``LOCAL_QUORUM``, the level of every read and write of the platform
(:mod:`layout.consistency`), still has its two replicas when one node is down.

Memory: Cassandra calls ``mlockall(MCL_CURRENT)`` at start-up.  As root (or
with a large ``RLIMIT_MEMLOCK``) that succeeds and faults in the whole
committed heap, so the idle RSS is about heap + 0.45 GiB, not just what is in
use.
"""

from __future__ import annotations

import ipaddress
import shutil
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from string import Template

from core.log import get_logger, log_event
from core.settings import Settings
from platformctl.install import install_jars, jars_dir
from platformctl.process import ManagedProcess, port_open
from platformctl.services.base import Service, jvm_process, logs_dir

__all__ = [
    "DEFAULT_HEAP_MB",
    "MAIN_CLASS",
    "RING",
    "RING_DELAY_MS",
    "SERVICE",
    "SERVICES",
    "TEMPLATE_DIR",
    "healthy",
    "node_address",
    "node_name",
    "process",
    "server_command",
    "write_config",
]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "infra/local/cassandra"
MAIN_CLASS = "org.apache.cassandra.service.CassandraDaemon"
# Cassandra's own formula would give 6 GiB on 24 GiB; 2 GiB holds the platform's
# keyspaces and a few more (each table keeps ~0.4 MB of heap; 1 GiB ran full GCs every
# 30-60 s under the test suite) and leaves room for Kafka, Spark and Airflow.
DEFAULT_HEAP_MB = 2048
RING = ("cassandra", "cassandra-2", "cassandra-3")
"""The ring's nodes' services, node N the Nth; the first is also the single node's."""
RING_DELAY_MS = 5000
"""How long a node joining the ring first listens to gossip (Cassandra's default 30 s is
for data centres; a loopback ring has said all it has to say within a second or two)."""
_log = get_logger(__name__)

# conf/jvm-server.options (cassandra-5.0), minus -XX:+AlwaysPreTouch and
# -XX:+UseNUMA (slow start-up / pointless on a one-socket laptop).
_JVM_SERVER_OPTIONS = [
    "-ea",
    "-da:net.openhft...",
    "-XX:+UseThreadPriorities",
    "-XX:+HeapDumpOnOutOfMemoryError",
    "-Xss256k",
    "-XX:+UseTLAB",
    "-XX:+ResizeTLAB",
    "-XX:+PerfDisableSharedMem",
    "-Djava.net.preferIPv4Stack=true",
]

# conf/jvm17-server.options (cassandra-5.0), copied flag for flag.
_JVM17_SERVER_OPTIONS = [
    # G1 settings
    "-XX:+UseG1GC",
    "-XX:+ParallelRefProcEnabled",
    "-XX:MaxTenuringThreshold=1",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1RSetUpdatingPauseTimePercent=5",
    "-XX:MaxGCPauseMillis=300",
    "-XX:InitiatingHeapOccupancyPercent=70",
    # JPMS
    "-Djdk.attach.allowAttachSelf=true",
    "--add-exports",
    "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports",
    "java.rmi/sun.rmi.server=ALL-UNNAMED",
    "--add-exports",
    "java.sql/java.sql=ALL-UNNAMED",
    "--add-exports",
    "java.base/java.lang.ref=ALL-UNNAMED",
    "--add-exports",
    "jdk.unsupported/sun.misc=ALL-UNNAMED",
    "--add-exports",
    "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports",
    "jdk.attach/sun.tools.attach=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.loader=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.reflect=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.math=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.module=ALL-UNNAMED",
    "--add-opens",
    "java.base/jdk.internal.util.jar=ALL-UNNAMED",
    "--add-opens",
    "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.io=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens",
    "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.util=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    # Netty
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.useCacheForAllThreads=true",
    "-Dio.netty.allocator.maxOrder=11",
]


def write_config(
    conf_dir: Path,
    *,
    data_dir: Path,
    native_port: int = 9042,
    storage_port: int = 7000,
    cluster_name: str = "local",
    address: str = "127.0.0.1",
    seed: str = "127.0.0.1",
) -> Path:
    """Render ``cassandra.yaml`` and copy ``logback.xml`` into *conf_dir*.

    All of Cassandra's directories (data, commitlog, hints, saved caches,
    cdc) are placed under *data_dir*; the node listens on *address* only (CQL
    and gossip) and joins its cluster through the node at *seed* (itself: a
    cluster of its own).  Creates *conf_dir* if needed and overwrites earlier
    files.  Returns the path of the written ``cassandra.yaml``.
    """
    for name, port in (("native_port", native_port), ("storage_port", storage_port)):
        if not 0 < port < 65536:
            raise ValueError(f"{name} out of range: {port}")
    if native_port == storage_port:
        raise ValueError("native_port and storage_port must differ")
    if not cluster_name or any(c in cluster_name for c in "'\n\r"):
        raise ValueError(f"unusable cluster_name: {cluster_name!r}")
    for name, value in (("address", address), ("seed", seed)):
        try:
            ipaddress.IPv4Address(value)
        except ValueError:
            raise ValueError(f"{name} must be an IPv4 address, got {value!r}") from None
    template = Template((TEMPLATE_DIR / "cassandra.yaml.tmpl").read_text())
    text = template.substitute(
        data_dir=Path(data_dir).resolve().as_posix(),
        native_port=native_port,
        storage_port=storage_port,
        cluster_name=cluster_name,
        address=address,
        seed=seed,
    )
    conf_dir = Path(conf_dir)
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "triggers").mkdir(exist_ok=True)
    shutil.copyfile(TEMPLATE_DIR / "logback.xml", conf_dir / "logback.xml")
    yaml_path = conf_dir / "cassandra.yaml"
    yaml_path.write_text(text)
    return yaml_path


def server_command(
    java: str,
    jars_dir: Path,
    cassandra_yaml: Path,
    log_dir: Path,
    data_dir: Path,
    heap_mb: int = DEFAULT_HEAP_MB,
    *,
    jmx_port: int | None = None,
    ring: bool = False,
    java_options: tuple[str, ...] = (),
) -> list[str]:
    """Return the argv that runs CassandraDaemon in the foreground.

    *jars_dir* holds the jars copied by the Maven project; *cassandra_yaml*
    is the result of :func:`write_config` (its folder must also hold
    ``logback.xml`` and ``triggers/``).  The heap is fixed at *heap_mb*
    (``-Xms`` = ``-Xmx``).  JMX is off unless *jmx_port* is given, in which
    case Cassandra's local-only JMX server (127.0.0.1, no remote access, as
    with ``LOCAL_JMX=yes``) listens there, which ``nodetool`` needs.
    The jamm jar found in *jars_dir* is added as ``-javaagent`` as
    ``cassandra-env.sh`` does.  The caller may set ``MALLOC_ARENA_MAX=4`` in
    the child's environment, as ``cassandra-env.sh`` does.  A *ring* node
    tells its peers it is going down (a single node has none to tell),
    listens to gossip for :data:`RING_DELAY_MS` before it joins, and flushes
    every schema change as it comes.  *java_options* come after Cassandra's own.
    """
    if not 512 <= heap_mb <= 8192:
        raise ValueError(f"heap_mb should be 512..8192, got {heap_mb}")
    jars_dir = Path(jars_dir).resolve()
    conf_dir = Path(cassandra_yaml).resolve().parent
    log_dir = Path(log_dir).resolve()
    argv = [java, f"-Xms{heap_mb}m", f"-Xmx{heap_mb}m"]
    argv += _JVM_SERVER_OPTIONS
    argv += _JVM17_SERVER_OPTIONS
    jamm = sorted(jars_dir.glob("jamm-*.jar"))
    if jamm:
        argv.append(f"-javaagent:{jamm[-1]}")
    if jmx_port is not None:
        argv.append(f"-Dcassandra.jmx.local.port={jmx_port}")
    argv += [
        f"-XX:HeapDumpPath={log_dir}",
        f"-XX:ErrorFile={log_dir / 'hs_err_pid%p.log'}",
        "-XX:+ExitOnOutOfMemoryError",
        *java_options,
    ]
    if ring:
        # Every schema change is flushed (Cassandra's default): a node killed with kill -9
        # before the flush below would restart without the keyspace in memory (the schema
        # is loaded before the commit log is replayed) and answer "keyspace ... does not
        # exist", while its peers keep sending it the keyspace's writes.
        argv.append(f"-Dcassandra.ring_delay_ms={RING_DELAY_MS}")
        # Nodes 2 and 3 bootstrap at the same time (see the module's docstring).
        argv.append("-Dcassandra.consistent.rangemovement=false")
    else:
        argv += [
            # Single node: no peers to tell about shutdown, skip the 2 s wait.
            "-Dcassandra.shutdown_announce_in_ms=0",
            # A schema change is not followed by a flush of every system_schema table: the
            # commit log already holds it, and a restart replays it. Creating a keyspace of
            # the layout's ~50 tables takes a third of the time (3 s instead of 6-10 s here).
            "-Dcassandra.test.flush_local_schema_changes=false",
        ]
    argv += [
        f"-Dcassandra.config={Path(cassandra_yaml).resolve().as_uri()}",
        "-Dcassandra-foreground=yes",
        f"-Dcassandra.storagedir={Path(data_dir).resolve()}",
        f"-Dcassandra.logdir={log_dir}",
        f"-Dcassandra.triggers_dir={conf_dir / 'triggers'}",
        f"-Dlogback.configurationFile={(conf_dir / 'logback.xml').as_uri()}",
        "-cp",
        f"{jars_dir}/*",
        MAIN_CLASS,
    ]
    return argv


def node_name(number: int) -> str:
    """The service of node ``number`` (from 1) of the ring; node 1 is the single node's."""
    return RING[number - 1]


def node_address(settings: Settings, number: int) -> str:
    """Where node ``number`` listens: 127.0.0.1 for the single node, else its ring address."""
    if not _ring(settings):
        return "127.0.0.1"
    return settings.local.cassandra_ring_addresses[number - 1]


def _ring(settings: Settings) -> bool:
    return settings.local.cassandra_nodes == len(RING)


def _log_dir(settings: Settings, number: int) -> Path:
    """Cassandra's own log folder: the platform's for node 1, a folder of their own for the
    others (every node names its log ``cassandra.log``)."""
    return logs_dir(settings) if number == 1 else logs_dir(settings) / node_name(number)


def process(settings: Settings, number: int = 1) -> ManagedProcess:
    """Node ``number`` of the local Cassandra, its config rendered under the state directory."""
    name = node_name(number)
    home = settings.local.state_dir / name
    address = node_address(settings, number)
    cassandra_yaml = write_config(
        home / "conf",
        data_dir=home / "data",
        native_port=settings.cassandra.port,
        storage_port=settings.local.cassandra_storage_port,
        address=address,
        seed=node_address(settings, 1),
    )
    argv = server_command(
        settings.local.java,
        jars_dir(settings, "cassandra"),
        cassandra_yaml,
        _log_dir(settings, number),
        home / "data",
        settings.local.cassandra_heap_mb,
        ring=_ring(settings),
        java_options=settings.local.cassandra_java_options,
    )
    ports = (settings.cassandra.port, settings.local.cassandra_storage_port)
    env = {"MALLOC_ARENA_MAX": "4"}
    return jvm_process(settings, name, argv, cassandra_yaml, ports, env=env, host=address)


def healthy(settings: Settings, number: int = 1) -> tuple[bool, str]:
    """Probe: the node answers a CQL query; on a ring, it has joined (its gossip says
    NORMAL), and the detail counts the nodes up and normal."""
    if _ring(settings):
        return _ring_node_healthy(settings, number)
    host = settings.cassandra.contact_points[0]
    if not port_open(settings.cassandra.port, host):
        return False, f"nothing listening on {host}:{settings.cassandra.port}"
    from core.cassandra import connect

    try:
        cluster, session = connect(settings.cassandra, connect_timeout_s=5, schema=False)
    except Exception as exc:  # NoHostAvailable while the node boots
        return False, f"CQL connect failed: {exc}"
    try:
        row = session.execute("SELECT release_version FROM system.local").one()
        return True, f"Cassandra {row.release_version}"
    finally:
        cluster.shutdown()


_GOSSIP = "SELECT address, status_with_port, status FROM system_views.gossip_info"


def _ring_node_healthy(settings: Settings, number: int) -> tuple[bool, str]:
    """Node ``number`` is up and normal (UN): it answers CQL (a node opens its CQL port once
    it has joined) and the ring's gossip says NORMAL (joined, not leaving); the detail says
    which of the ring's nodes are."""
    from core.cassandra import connect

    address, port = node_address(settings, number), settings.cassandra.port
    if not port_open(port, address):
        return False, f"nothing listening on {address}:{port}"
    node = settings.cassandra.model_copy(update={"contact_points": (address,)})
    try:
        cluster, session = connect(node, connect_timeout_s=5, schema=False)
    except Exception as exc:  # NoHostAvailable while the node boots
        return False, f"CQL connect failed: {exc}"
    try:
        rows = session.execute(_GOSSIP)
    except Exception as exc:
        return False, f"gossip read failed: {exc}"
    finally:
        cluster.shutdown()
    # A node gossips its own state under both names, its peers' under the first only.
    states = {row.address: row.status_with_port or row.status or "" for row in rows}
    normal = {node for node, state in states.items() if state.startswith("NORMAL")}
    addresses = settings.local.cassandra_ring_addresses
    up = [a for a in addresses if a in normal and (a == address or port_open(port, a))]
    state = "UN" if address in normal else "not normal yet"
    return address in normal, (
        f"{state}; {len(up)} of {len(addresses)} nodes up and normal: {', '.join(up) or 'none'}"
    )


def _joining(settings: Settings, number: int) -> tuple[bool, str]:
    """What ``up`` waits for after starting node ``number`` (2 or more) of a ring: that it is
    up and normal; or, while the ring forms (no other joining node is normal yet), that it
    listens to gossip, so that the next one starts while it joins. :func:`_provision` then
    waits for all of them. A node restarted in a ring that works is waited for whole."""
    answers, detail = healthy(settings, number)
    if answers:
        return answers, detail
    others = [n for n in range(2, len(RING) + 1) if n != number]
    if any(healthy(settings, n)[0] for n in others):
        return False, detail  # the ring works: this node has to join it
    address, port = node_address(settings, number), settings.local.cassandra_storage_port
    if port_open(port, address):
        return True, f"listening to gossip on {address}:{port}, joining"
    return False, detail


def _provision(settings: Settings, number: int = 1) -> None:
    """The platform's keyspace and the speed and batch tables, before any job writes: once
    every node is up and normal (a keyspace of three replicas is made with three nodes to
    hold them)."""
    if number != settings.local.cassandra_nodes:
        return
    from core.cassandra import connect, ensure_keyspace
    from layout import create_tables

    if _ring(settings):
        _wait_all_normal(settings)

    cluster, session = connect(settings.cassandra)
    try:
        ensure_keyspace(session, settings.cassandra.keyspace, settings.cassandra.replication)
    finally:
        cluster.shutdown()
    create_tables(settings)
    log_event(_log, "cassandra.provisioned", keyspace=settings.cassandra.keyspace)


def _wait_all_normal(settings: Settings) -> None:
    deadline = time.monotonic() + settings.local.start_timeout_s
    while True:
        states = [healthy(settings, n) for n in range(1, len(RING) + 1)]
        if all(ok for ok, _ in states):
            return
        if time.monotonic() > deadline:
            details = "; ".join(f"{node_name(n)}: {d}" for n, (_, d) in enumerate(states, 1))
            raise TimeoutError(f"the ring's nodes did not all join: {details}")
        time.sleep(1)


_INSTALL = partial(install_jars, component="cassandra")


def _node(number: int) -> Service:
    process_of: Callable[[Settings], ManagedProcess] = partial(process, number=number)
    return Service(
        name=node_name(number),
        process=process_of,
        probe=partial(healthy, number=number),
        requires=() if number == 1 else (node_name(1),),
        install=_INSTALL,  # one object: ``up`` runs it once for the whole ring
        provision=partial(_provision, number=number),
        enabled=None if number == 1 else _ring,
        ready=None if number == 1 else partial(_joining, number=number),
    )


SERVICE = _node(1)
"""The single node, and the ring's first node (its seed)."""
SERVICES: tuple[Service, ...] = (SERVICE, *(_node(n) for n in range(2, len(RING) + 1)))
"""Every node, in the order they start; nodes 2 and 3 only with ``local.cassandra_nodes=3``."""
