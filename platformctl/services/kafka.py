"""Local single-node Apache Kafka 4.4 (KRaft, broker + controller) from Maven Central jars.

The jars come from ``infra/local/maven/kafka/pom.xml`` (``kafka_2.13`` and its
runtime dependencies plus the log4j2 slf4j binding, copied into one
directory); there is no Kafka tarball and no ``bin/`` scripts.  This module
replaces the parts of ``kafka-storage.sh``, ``kafka-server-start.sh`` and
``kafka-run-class.sh`` that matter here:

* :func:`write_config` renders ``server.properties`` from
  ``infra/local/kafka/server.properties.tmpl`` and copies ``log4j2.yaml``
  next to it;
* :func:`format_command` builds the argv of ``kafka.tools.StorageTool format
  --standalone``, to run once while :func:`is_formatted` is false (the data
  dir has no ``meta.properties`` yet);
* :func:`server_command` builds the argv that runs ``kafka.Kafka`` in the
  foreground with the JVM flags of ``kafka-run-class.sh``.

These are plain functions: no environment variables are read and no process
is started.  :data:`SERVICE` puts them to work for ``platformctl``: the
broker's process under the state directory, the format before its first
start, a metadata probe, and the platform's topics once it is healthy.  On
SIGTERM the broker shuts down cleanly (writes ``.kafka_cleanshutdown`` in the
data dir) and the JVM exits with status 143, which is the normal outcome.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
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
    "SERVICE",
    "STORAGE_TOOL_CLASS",
    "TEMPLATE_DIR",
    "format_command",
    "healthy",
    "is_formatted",
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
_log = get_logger(__name__)

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
) -> Path:
    """Render ``server.properties`` and copy ``log4j2.yaml`` into *conf_dir*.

    The broker listens on ``127.0.0.1:port`` (PLAINTEXT) and its controller on
    ``127.0.0.1:controller_port``; partition and metadata logs live in
    *data_dir*.  Creates *conf_dir* and *log_dir* (log4j2 writes
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
    template = Template((TEMPLATE_DIR / "server.properties.tmpl").read_text())
    text = template.substitute(
        node_id=node_id,
        port=port,
        controller_port=controller_port,
        data_dir=Path(data_dir).resolve().as_posix(),
    )
    conf_dir = Path(conf_dir)
    conf_dir.mkdir(parents=True, exist_ok=True)
    Path(log_dir).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TEMPLATE_DIR / "log4j2.yaml", conf_dir / "log4j2.yaml")
    properties = conf_dir / "server.properties"
    properties.write_text(text)
    return properties


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
    java: str, jars_dir: Path, server_properties: Path, cluster_id: str, log_dir: Path
) -> list[str]:
    """Return the argv that formats the data dir named in *server_properties*.

    ``--standalone`` makes this node the only voter of a dynamic KRaft quorum
    (``controller.quorum.bootstrap.servers`` is set, ``controller.quorum.voters``
    is not).  Run it only while :func:`is_formatted` is false: on a formatted
    dir it exits with status 1 and changes nothing.  Uses ``kafka-run-class.sh``'s
    default tool heap (256 MiB).
    """
    if len(cluster_id) != 22:
        raise ValueError(f"cluster_id should be 22 base64url chars, got {cluster_id!r}")
    server_properties = Path(server_properties).resolve()
    return [
        java, "-Xmx256m", *_JVM_OPTS,
        *_log_and_classpath(jars_dir, server_properties.parent, log_dir),
        STORAGE_TOOL_CLASS, "format", "--config", str(server_properties),
        "--cluster-id", cluster_id, "--standalone",
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


def _config(settings: Settings) -> Path:
    """``server.properties`` of the local broker, rendered under the state directory."""
    home = settings.local.state_dir / "kafka"
    return write_config(
        home / "conf",
        data_dir=home / "data",
        log_dir=logs_dir(settings),
        port=_host_port(settings)[1],
        controller_port=settings.local.kafka_controller_port,
    )


def process(settings: Settings) -> ManagedProcess:
    """The local broker, with its config rendered under the state directory."""
    server_properties = _config(settings)
    argv = server_command(
        settings.local.java,
        jars_dir(settings, "kafka"),
        server_properties,
        logs_dir(settings),
        settings.local.kafka_heap_mb,
    )
    ports = (_host_port(settings)[1], settings.local.kafka_controller_port)
    return jvm_process(settings, "kafka", argv, server_properties, ports)


def _format_once(settings: Settings) -> None:
    """Format the storage of a broker that never ran (KRaft needs it before the first start)."""
    if is_formatted(settings.local.state_dir / "kafka" / "data"):
        return
    argv = format_command(
        settings.local.java,
        jars_dir(settings, "kafka"),
        _config(settings),
        random_cluster_id(),
        logs_dir(settings),
    )
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"Formatting Kafka storage failed:\n{result.stdout}{result.stderr}")


def healthy(settings: Settings, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Probe: the broker answers a metadata request."""
    host, port = _host_port(settings)
    if not port_open(port, host):
        return False, f"nothing listening on {host}:{port}"
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(settings.kafka.client_config() | {"log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception as exc:  # KafkaException: the broker is not ready yet
        return False, f"metadata request failed: {exc}"
    return True, f"{len(metadata.brokers)} broker(s), {len(metadata.topics)} topic(s)"


def _provision(settings: Settings) -> None:
    """The platform's topics and every declared pipeline's, before anything produces to them
    (the declarations checked whole first: nothing is half-deployed)."""
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, pipeline_topics, platform_topics
    from pipelines import validate_all

    topics = [*platform_topics(settings.kafka), *pipeline_topics(settings.kafka, validate_all())]
    created = ensure_topics(AdminClient(settings.kafka.client_config()), topics)
    log_event(_log, "kafka.provisioned", topics_created=created)


SERVICE = Service(
    name="kafka",
    process=process,
    probe=healthy,
    install=partial(install_jars, component="kafka"),
    prepare=_format_once,
    provision=_provision,
)
