"""The local platform: Kafka, Cassandra, the platform's own services and Airflow.

``up`` installs what is missing, starts each service (or finds it running),
waits for its health probe, then creates the topics and the keyspace from
code. ``down`` stops only what ``up`` started, by pid. All state lives under
``settings.local.state_dir`` (Airflow's under ``settings.airflow.home``).
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import PROJECT_ROOT, Settings, settings_env
from platformctl.process import ManagedProcess, ServiceStartError, port_open
from platformctl.services import airflow as airflow_service
from platformctl.services import cassandra as cassandra_service
from platformctl.services import kafka as kafka_service

__all__ = ["AIRFLOW_SERVICES", "SERVICES", "ServiceStatus", "down", "processes", "status", "up"]

AIRFLOW_SERVICES = tuple(f"airflow-{c}" for c in airflow_service.COMPONENTS)
"""Airflow's api-server, dag-processor and scheduler: one service of three processes."""
SERVICES = ("kafka", "cassandra", "collector", "speed", "serving", *AIRFLOW_SERVICES)
_log = get_logger(__name__)


@dataclass(frozen=True)
class ServiceStatus:
    """What ``status`` reports for one service."""

    name: str
    running: bool
    healthy: bool
    port: int
    pid: int | None
    rss_mb: float | None
    log_file: Path
    detail: str


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host or "127.0.0.1", int(port)


def _kafka_port(settings: Settings) -> int:
    return _host_port(settings.kafka.bootstrap_servers)[1]


def _logs_dir(settings: Settings) -> Path:
    return settings.local.state_dir / "logs"


def _run_dir(settings: Settings) -> Path:
    return settings.local.state_dir / "run"


def kafka_process(settings: Settings) -> ManagedProcess:
    """The local broker, with its config rendered under the state directory."""
    home = settings.local.state_dir / "kafka"
    server_properties = kafka_service.write_config(
        home / "conf",
        data_dir=home / "data",
        log_dir=_logs_dir(settings),
        port=_kafka_port(settings),
        controller_port=settings.local.kafka_controller_port,
    )
    return ManagedProcess(
        name="kafka",
        argv=kafka_service.server_command(
            settings.local.java,
            settings.local.state_dir / "jars" / "kafka",
            server_properties,
            _logs_dir(settings),
            settings.local.kafka_heap_mb,
        ),
        pid_file=_run_dir(settings) / "kafka.pid",
        log_file=_logs_dir(settings) / "kafka.out",
        marker=str(server_properties),
        ports=(_kafka_port(settings), settings.local.kafka_controller_port),
    )


def cassandra_process(settings: Settings) -> ManagedProcess:
    """The local Cassandra node, with its config rendered under the state directory."""
    home = settings.local.state_dir / "cassandra"
    cassandra_yaml = cassandra_service.write_config(
        home / "conf",
        data_dir=home / "data",
        native_port=settings.cassandra.port,
        storage_port=settings.local.cassandra_storage_port,
    )
    return ManagedProcess(
        name="cassandra",
        argv=cassandra_service.server_command(
            settings.local.java,
            settings.local.state_dir / "jars" / "cassandra",
            cassandra_yaml,
            _logs_dir(settings),
            home / "data",
            settings.local.cassandra_heap_mb,
        ),
        pid_file=_run_dir(settings) / "cassandra.pid",
        log_file=_logs_dir(settings) / "cassandra.out",
        marker=str(cassandra_yaml),
        ports=(settings.cassandra.port, settings.local.cassandra_storage_port),
        env={"MALLOC_ARENA_MAX": "4"},
    )


def collector_process(settings: Settings) -> ManagedProcess:
    """The HTTP collector, run from this Python environment with these settings."""
    instance = str(settings.local.state_dir / "collector")
    return ManagedProcess(
        name="collector",
        argv=[sys.executable, "-m", "ingest", "--instance", instance],
        pid_file=_run_dir(settings) / "collector.pid",
        log_file=_logs_dir(settings) / "collector.log",
        marker=f"--instance {instance}",
        ports=(settings.collector.port,),
        env=settings_env(settings),
        cwd=PROJECT_ROOT,
    )


def collector_healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the collector's /health answers 200 (it checks Kafka itself)."""
    import httpx

    host = "127.0.0.1" if settings.collector.host == "0.0.0.0" else settings.collector.host
    if not port_open(settings.collector.port, host):
        return False, f"nothing listening on {host}:{settings.collector.port}"
    try:
        answer = httpx.get(f"http://{host}:{settings.collector.port}/health", timeout=5)
    except httpx.HTTPError as exc:
        return False, f"/health failed: {exc}"
    body = answer.json()
    return answer.status_code == 200, (
        f"kafka {body.get('kafka')}, queue depth {body.get('queue_depth')}, {body.get('contract')}"
    )


def speed_process(settings: Settings) -> ManagedProcess:
    """The streaming speed layer (a Spark driver running one query per view)."""
    instance = str(settings.local.state_dir / "speed")
    return ManagedProcess(
        name="speed",
        argv=[sys.executable, "-m", "speed_layer", "--instance", instance],
        pid_file=_run_dir(settings) / "speed.pid",
        log_file=_logs_dir(settings) / "speed.log",
        marker=f"--instance {instance}",
        env=settings_env(settings),
        cwd=PROJECT_ROOT,
    )


def speed_progress(settings: Settings) -> dict[str, dict]:
    """The speed layer's progress per view, as recorded after each micro-batch."""
    from core.cassandra import connect
    from speed_layer.schema import PROGRESS_TABLE

    cluster, session = connect(settings.cassandra, connect_timeout_s=3)
    try:
        rows = session.execute(f"SELECT * FROM {settings.cassandra.keyspace}.{PROGRESS_TABLE}")
        return {row.view_name: row._asdict() for row in rows}
    except Exception:  # the table does not exist before the first start
        return {}
    finally:
        cluster.shutdown()


def speed_healthy(settings: Settings, max_silence_s: float = 60.0) -> tuple[bool, str]:
    """Probe: every view's query reported progress recently and its watermark is not ahead
    of now; detail = freshness, lag, rates and the rows dropped (late, future)."""
    from core.event_time import EventTimeBounds
    from views import VIEWS

    if not port_open(settings.cassandra.port, settings.cassandra.contact_points[0]):
        return False, "Cassandra is down: progress unknown"
    progress = speed_progress(settings)
    now = datetime.now(UTC)
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    started = speed_process(settings).started_at()
    verdicts = [
        view_progress_health(
            spec.name, progress.get(spec.name), now, tolerance, started, max_silence_s
        )
        for spec in VIEWS
    ]
    return all(ok for ok, _ in verdicts), "; ".join(text for _, text in verdicts)


def view_progress_health(
    view: str,
    row: dict | None,
    now: datetime,
    tolerance: timedelta,
    started: datetime | None = None,
    max_silence_s: float = 60.0,
) -> tuple[bool, str]:
    """(healthy, one line) for one view's ``speed_progress`` row (naive times are UTC)."""

    def utc(moment: datetime | None) -> datetime | None:
        return moment.replace(tzinfo=UTC) if moment is not None else None

    row = row or {}
    beat = utc(row.get("heartbeat_at"))
    if (
        beat is None
        or (now - beat).total_seconds() > max_silence_s
        or (started is not None and beat < started)
    ):
        return False, f"{view}: no recent progress"
    watermark = utc(row.get("watermark"))
    if watermark is not None and watermark - now > tolerance:
        return False, (
            f"{view}: ERROR watermark {watermark.isoformat()} is ahead of now; every new event "
            "is dropped as late. Reset the speed layer (docs/operations.md)"
        )
    newest = utc(row.get("max_event_time"))
    fresh = "unknown"
    if newest is not None and newest - now <= tolerance:
        fresh = f"{max(0.0, (now - newest).total_seconds()):.0f}s"
    return True, (
        f"{view}: fresh {fresh}, lag {row.get('kafka_lag')}, "
        f"in {row.get('input_rows_per_s') or 0:.0f}/s, "
        f"done {row.get('processed_rows_per_s') or 0:.0f}/s, "
        f"batch {row.get('batch_duration_ms')}ms, late dropped {row.get('late_rows_dropped')}, "
        f"future dropped {row.get('future_rows_dropped') or 0}"
    )


def serving_process(settings: Settings) -> ManagedProcess:
    """The serving API and dashboard (uvicorn workers), run from this Python environment."""
    instance = str(settings.local.state_dir / "serving")
    return ManagedProcess(
        name="serving",
        argv=[sys.executable, "-m", "serving", "serve", "--instance", instance],
        pid_file=_run_dir(settings) / "serving.pid",
        log_file=_logs_dir(settings) / "serving.log",
        marker=f"--instance {instance}",
        ports=(settings.serving.port,),
        env=settings_env(settings),
        cwd=PROJECT_ROOT,
    )


def serving_healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the serving API's /health answers 200; detail = boundary and freshness per view."""
    import httpx

    host = "127.0.0.1" if settings.serving.host == "0.0.0.0" else settings.serving.host
    if not port_open(settings.serving.port, host):
        return False, f"nothing listening on {host}:{settings.serving.port}"
    try:
        answer = httpx.get(f"http://{host}:{settings.serving.port}/health", timeout=5)
    except httpx.HTTPError as exc:
        return False, f"/health failed: {exc}"
    body = answer.json()
    if answer.status_code != 200:
        return False, str(body.get("message"))
    parts = [f"DEGRADED {body.get('message')}"] if body.get("status") == "degraded" else []
    for view, boundary in body.get("boundary", {}).items():
        lag = body.get("freshness", {}).get(view, {}).get("lag_s")
        parts.append(f"{view}: boundary {boundary or 'none'}, speed lag {lag}s")
    return True, f"http://{host}:{settings.serving.port}/dashboard; " + "; ".join(parts)


def airflow_process(settings: Settings, component: str) -> ManagedProcess:
    """One Airflow component, run from Airflow's venv (see :mod:`platformctl.services.airflow`)."""
    pid_file = _run_dir(settings) / f"airflow-{component}.pid"
    api_server = component == "api-server"
    return ManagedProcess(
        name=f"airflow-{component}",
        argv=airflow_service.server_command(
            settings.airflow.venv, component, pid_file, port=settings.airflow.api_port
        ),
        pid_file=pid_file,
        log_file=_logs_dir(settings) / f"airflow-{component}.log",
        marker=str(pid_file),
        title=airflow_service.process_title(settings.airflow.api_port) if api_server else None,
        ports=(settings.airflow.api_port,) if api_server else (),
        env=airflow_service.service_env(settings),
        cwd=PROJECT_ROOT,
    )


def airflow_healthy(settings: Settings, component: str) -> tuple[bool, str]:
    """Probe: the api-server's health answer says this component is healthy."""
    from platformctl import airflow_rest as airflow

    try:
        answer = airflow.health(settings)
    except Exception as exc:  # not listening yet, or an error while the DB is migrated
        return False, f"health check failed: {exc}"
    started_at = airflow_process(settings, component).started_at()
    healthy, detail = airflow.component_health(answer, component, started_at)
    if not healthy:
        return False, detail
    if component == "api-server":
        url = airflow_service.api_url(settings.airflow)
        return True, f"UI {url} ({airflow_service.login_hint(settings)}); {detail}"
    if component == "scheduler":
        return True, f"{detail}; LocalExecutor, parallelism {settings.airflow.parallelism}"
    try:
        dags, errors = airflow.dag_summary(settings)
    except Exception as exc:  # the count is a detail: the heartbeat decides health
        return True, f"{detail}; DAGs unknown ({exc})"
    broken = f": {errors}" if errors else ""
    return True, f"{detail}; {dags} DAGs, {len(errors)} import errors{broken}"


def _migrate_airflow_once(settings: Settings) -> None:
    """``airflow db migrate`` unless done with this Airflow lock; SQLite in WAL mode."""
    import sqlite3
    import subprocess
    from contextlib import closing

    lock = hashlib.sha256((PROJECT_ROOT / "requirements" / "airflow.lock").read_bytes())
    database, stamp = settings.airflow.home / "airflow.db", settings.airflow.home / ".migrated"
    if database.exists() and stamp.exists() and stamp.read_text() == lock.hexdigest():
        return
    settings.airflow.home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = subprocess.run(
        airflow_service.migrate_command(settings.airflow.venv),
        env={**os.environ, **airflow_service.service_env(settings)},
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise ServiceStartError(
            f"`airflow db migrate` failed (exit {result.returncode}):\n"
            + "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        )
    # Readers no longer block the one writer: three processes share this file.
    with closing(sqlite3.connect(database)) as connection:
        connection.execute("PRAGMA journal_mode=WAL")
    stamp.write_text(lock.hexdigest())
    log_event(_log, "airflow.migrated", seconds=round(time.monotonic() - started, 1))


def _format_kafka_once(settings: Settings) -> None:
    home = settings.local.state_dir / "kafka"
    if kafka_service.is_formatted(home / "data"):
        return
    import subprocess

    server_properties = home / "conf" / "server.properties"
    argv = kafka_service.format_command(
        settings.local.java,
        settings.local.state_dir / "jars" / "kafka",
        server_properties,
        kafka_service.random_cluster_id(),
        _logs_dir(settings),
    )
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"Formatting Kafka storage failed:\n{result.stdout}{result.stderr}")


def kafka_healthy(settings: Settings, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Probe: the broker answers a metadata request."""
    host, port = _host_port(settings.kafka.bootstrap_servers)
    if not port_open(port, host):
        return False, f"nothing listening on {host}:{port}"
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(settings.kafka.client_config() | {"log_level": 0})
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except Exception as exc:  # KafkaException: the broker is not ready yet
        return False, f"metadata request failed: {exc}"
    return True, f"{len(metadata.brokers)} broker(s), {len(metadata.topics)} topic(s)"


def cassandra_healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the node answers a CQL query."""
    host = settings.cassandra.contact_points[0]
    if not port_open(settings.cassandra.port, host):
        return False, f"nothing listening on {host}:{settings.cassandra.port}"
    from core.cassandra import connect

    try:
        cluster, session = connect(settings.cassandra, connect_timeout_s=3)
    except Exception as exc:  # NoHostAvailable while the node boots
        return False, f"CQL connect failed: {exc}"
    try:
        row = session.execute("SELECT release_version FROM system.local").one()
        return True, f"Cassandra {row.release_version}"
    finally:
        cluster.shutdown()


def processes(settings: Settings) -> dict[str, ManagedProcess]:
    """Every service this platform runs, in start order."""
    return {
        "kafka": kafka_process(settings),
        "cassandra": cassandra_process(settings),
        "collector": collector_process(settings),
        "speed": speed_process(settings),
        "serving": serving_process(settings),
        **{
            f"airflow-{component}": airflow_process(settings, component)
            for component in airflow_service.COMPONENTS
        },
    }


_PROBES = {
    "kafka": kafka_healthy,
    "cassandra": cassandra_healthy,
    "collector": collector_healthy,
    "speed": speed_healthy,
    "serving": serving_healthy,
}
_JAR_SERVICES = ("kafka", "cassandra")


def _probe(settings: Settings, name: str) -> tuple[bool, str]:
    if name in AIRFLOW_SERVICES:
        return airflow_healthy(settings, name.removeprefix("airflow-"))
    return _PROBES[name](settings)


def _provision(settings: Settings, services: tuple[str, ...]) -> None:
    """Create, from code, the topics, keyspace and Airflow pools of the services just brought up."""
    if "kafka" in services:
        from confluent_kafka.admin import AdminClient

        from ingest.topics import ensure_topics, platform_topics

        created = ensure_topics(
            AdminClient(settings.kafka.client_config()), platform_topics(settings.kafka)
        )
        log_event(_log, "kafka.provisioned", topics_created=created)
    if "cassandra" in services:
        from core.cassandra import connect, ensure_keyspace

        cluster, session = connect(settings.cassandra)
        try:
            ensure_keyspace(session, settings.cassandra.keyspace, settings.cassandra.replication)
        finally:
            cluster.shutdown()
        from batch_layer.schema import create_tables as create_batch_tables
        from speed_layer.job import create_tables

        create_tables(settings)
        create_batch_tables(settings)
        log_event(_log, "cassandra.provisioned", keyspace=settings.cassandra.keyspace)
    if "airflow-api-server" in services:
        from batch_layer.pipelines import PIPELINES
        from platformctl.airflow_rest import ensure_pool

        changed = [
            spec.pool
            for spec in PIPELINES
            if ensure_pool(settings, spec.pool, 1, f"{spec.name}: one batch step at a time")
        ]
        log_event(_log, "airflow.pools_provisioned", changed=changed)


def up(
    settings: Settings, services: tuple[str, ...] = SERVICES, *, install_missing: bool = True
) -> dict[str, float]:
    """Start the services that are not running, wait for health, provision.

    Returns each service's start time in seconds (0.0 for one already up).
    """
    from platformctl.install import install_airflow, install_jars

    if install_missing:
        for name in services:
            if name in _JAR_SERVICES:
                install_jars(settings, name)
        if set(services) & set(AIRFLOW_SERVICES):
            install_airflow(settings)
    managed = processes(settings)
    timings: dict[str, float] = {}
    for name in services:
        process = managed[name]
        if process.pid() is not None and _probe(settings, name)[0]:
            timings[name] = 0.0
        else:
            if name == "kafka":
                _format_kafka_once(settings)
            if name in AIRFLOW_SERVICES:
                _migrate_airflow_once(settings)
            started = time.monotonic()
            pid = process.start()
            log_event(_log, "service.starting", service=name, pid=pid, log=str(process.log_file))
            process.wait_healthy(
                lambda n=name: _probe(settings, n)[0], settings.local.start_timeout_s
            )
            timings[name] = round(time.monotonic() - started, 1)
            log_event(_log, "service.healthy", service=name, pid=pid, seconds=timings[name])
        # Topics before the collector produces; keyspace before jobs write.
        _provision(settings, (name,))
    return timings


def down(settings: Settings, services: tuple[str, ...] = SERVICES) -> list[str]:
    """Stop the services this platform started; return the names stopped."""
    stopped = []
    for name, process in reversed(processes(settings).items()):
        if name in services and process.stop():
            log_event(_log, "service.stopped", service=name)
            stopped.append(name)
    return stopped


def status(settings: Settings) -> list[ServiceStatus]:
    """Each service: running, healthy, port, pid, memory, log path and probe detail."""
    result = []
    for name, process in processes(settings).items():
        pid = process.pid()
        healthy, detail = _probe(settings, name) if pid is not None else (False, "not running")
        result.append(
            ServiceStatus(
                name,
                pid is not None,
                healthy,
                process.ports[0] if process.ports else 0,
                pid,
                process.rss_mb(),
                process.log_file,
                detail,
            )
        )
    return result
