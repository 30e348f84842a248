"""The local platform: Kafka, Cassandra, the platform's own services and Airflow.

``up`` installs what is missing, starts each service (or finds it running),
waits for its health probe, then creates the topics and the keyspace from
code. ``down`` stops only what ``up`` started, by pid. All state lives under
``settings.local.state_dir`` (Airflow's under ``settings.airflow.home``).

Each service is one :class:`~platformctl.services.base.Service` record of
:data:`platformctl.services.REGISTRY`; this module knows none by name.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import Settings
from pipelines import validate_all
from platformctl.process import ManagedProcess
from platformctl.services import REGISTRY, Service
from platformctl.services import airflow as _airflow
from platformctl.services import cassandra as _cassandra
from platformctl.services import kafka as _kafka
from platformctl.services import spark as _spark

# Kept for their importers (bench/, tests/integration/serving).
from platformctl.services.serving import healthy as serving_healthy
from platformctl.services.speed import progress as speed_progress

__all__ = [
    "AIRFLOW_SERVICES",
    "CASSANDRA_RING",
    "KAFKA_CLUSTER_SERVICES",
    "SERVICES",
    "SPARK_CLUSTER",
    "ServiceStatus",
    "down",
    "processes",
    "serving_healthy",
    "speed_progress",
    "status",
    "up",
]

AIRFLOW_SERVICES = _airflow.NAMES
"""Airflow's api-server, dag-processor and scheduler: one service of three processes."""
KAFKA_CLUSTER_SERVICES = _kafka.NAMES
"""The nodes of a local Kafka cluster (``local.kafka_nodes=3``); node 1 is ``kafka``."""
SPARK_CLUSTER = tuple(service.name for service in _spark.SERVICES)
"""The standalone Spark cluster's master and workers (``spark.cluster=standalone``)."""
CASSANDRA_RING = _cassandra.RING
"""The local Cassandra ring's nodes (``local.cassandra_nodes=3``); the first is the single
node of ``local.cassandra_nodes=1``."""
SERVICES = tuple(service.name for service in REGISTRY)
"""Every service's name, in start order."""
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


def _records(names: tuple[str, ...]) -> list[Service]:
    by_name = {service.name: service for service in REGISTRY}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"Unknown service(s) {unknown}; expected names from {SERVICES}.")
    return [by_name[name] for name in names]


def processes(settings: Settings) -> dict[str, ManagedProcess]:
    """Every service this platform runs, in start order."""
    return {service.name: service.process(settings) for service in REGISTRY}


def up(
    settings: Settings, services: tuple[str, ...] = SERVICES, *, install_missing: bool = True
) -> dict[str, float]:
    """Start the services that are not running, wait for health, provision.

    Services the settings do not run are left out. Returns each service's start
    time in seconds (0.0 for one already up).
    """
    validate_all(settings=settings)  # a mis-declaration is refused before anything starts
    records = [service for service in _records(services) if service.runs_with(settings)]
    if install_missing:  # the Airflow components share one venv: installed once
        for install in dict.fromkeys(s.install for s in records if s.install is not None):
            install(settings)
    managed = processes(settings)
    timings: dict[str, float] = {}
    for service in records:
        name, process = service.name, managed[service.name]
        if process.pid() is not None and service.probe(settings)[0]:
            timings[name] = 0.0
        else:
            if service.prepare is not None:
                service.prepare(settings)
            started = time.monotonic()
            pid = process.start()
            log_event(_log, "service.starting", service=name, pid=pid, log=str(process.log_file))
            process.wait_healthy(
                lambda ready=service.ready or service.probe: ready(settings)[0],
                settings.local.start_timeout_s,
            )
            timings[name] = round(time.monotonic() - started, 1)
            log_event(_log, "service.healthy", service=name, pid=pid, seconds=timings[name])
        # Topics before the collector produces; keyspace before jobs write.
        if service.provision is not None:
            service.provision(settings)
    return timings


def down(settings: Settings, services: tuple[str, ...] = SERVICES) -> list[str]:
    """Stop the services this platform started; return the names stopped.

    In reverse start order, one after the other, except the members of a quorum: those
    are stopped at once.
    """
    managed = processes(settings)
    quorum = {service.name: service.quorum for service in REGISTRY}
    batches: dict[tuple[str, str], list[str]] = {}
    for name in reversed(managed):
        if name in services:
            key = ("quorum", quorum[name]) if quorum[name] else ("service", name)
            batches.setdefault(key, []).append(name)
    stopped = []
    for names in batches.values():
        with ThreadPoolExecutor(len(names)) as pool:
            results = list(pool.map(lambda name: managed[name].stop(), names))
        for name, was_running in zip(names, results, strict=True):
            if was_running:
                log_event(_log, "service.stopped", service=name)
                stopped.append(name)
    return stopped


def status(settings: Settings) -> list[ServiceStatus]:
    """Each service the settings run, or that runs anyway: running, healthy, port, pid,
    memory, log path and probe detail."""
    result = []
    for service in REGISTRY:
        process = service.process(settings)
        pid = process.pid()
        if pid is None and not service.runs_with(settings):
            continue  # a cluster's node these settings do not run
        healthy, detail = service.probe(settings) if pid is not None else (False, "not running")
        result.append(
            ServiceStatus(
                service.name,
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
