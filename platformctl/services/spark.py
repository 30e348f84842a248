"""A Spark standalone cluster on this machine: one master and two workers, each a JVM of its
own, run from the Spark that pyspark ships (its ``jars/``; no Spark download).

Started only when ``spark.cluster`` is ``standalone`` (``WAP_SPARK__CLUSTER=standalone``);
every job then submits to ``spark://127.0.0.1:<master_port>``, with its executors in the
workers' JVMs and its Python workers started by those executors. This replaces the parts
of ``start-master.sh``, ``start-worker.sh`` and ``spark-class`` that matter here:

* :func:`master_command` and :func:`worker_command` build the argv that runs
  ``org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` in the foreground;
* :func:`write_config` writes the daemons' properties file (``spark.authenticate``: the
  master and workers take orders only from applications that hold the cluster's secret,
  which reaches every process through its environment, never a command line);
* :func:`cluster_state` reads the master's JSON status page: workers, applications and the
  cores they hold, for the probes and ``platformctl status``.

Everything binds to loopback. On SIGTERM a worker kills its executors and exits.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from core.settings import Settings
from core.spark import AUTH_SECRET_ENV, C1_ONLY, LOCAL_LOG4J2
from platformctl.process import ManagedProcess, port_open
from platformctl.services.base import Service, jvm_process

__all__ = [
    "MASTER",
    "SERVICES",
    "WORKERS",
    "ClusterState",
    "cluster_state",
    "master_command",
    "spark_home",
    "worker_command",
    "write_config",
]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DAEMON_HEAP_MB = 256  # spark-env's SPARK_DAEMON_MEMORY is 1 GiB; a two-worker cluster needs little
WORKERS = 2
"""Workers of the local cluster: ``spark-worker-1`` and ``spark-worker-2``."""
MASTER = "spark-master"


def spark_home() -> Path:
    """The Spark that pyspark ships: its ``jars/`` run the daemons, and a worker builds its
    executors' class path from it (``SPARK_HOME``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _home(settings: Settings) -> Path:
    return settings.local.state_dir / "spark-cluster"


def write_config(conf_dir: Path) -> Path:
    """The daemons' ``spark-defaults``-style properties file (mode 600)."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    path = conf_dir / "spark-daemons.conf"
    path.write_text(
        "spark.authenticate true\n"
        # No REST submission server: applications come through the authenticated RPC only.
        "spark.master.rest.enabled false\n"
        # A finished application's work directory (its jars, logs) is removed after a day.
        "spark.worker.cleanup.enabled true\n"
        "spark.worker.cleanup.appDataTtl 86400\n"
    )
    path.chmod(0o600)
    return path


def _java(settings: Settings, config: Path, main_class: str) -> list[str]:
    return [
        settings.local.java,
        f"-Xmx{DAEMON_HEAP_MB}m",
        *C1_ONLY.split(),
        f"-Dlog4j2.configurationFile={LOCAL_LOG4J2.as_uri()}",
        "-cp",
        f"{spark_home() / 'jars'}/*",
        main_class,
        "--properties-file",
        str(config),
    ]


def master_command(settings: Settings, config: Path) -> list[str]:
    """``Master`` in the foreground on loopback."""
    spark = settings.spark
    return [
        *_java(settings, config, MASTER_CLASS),
        *("--host", "127.0.0.1", "--port", str(spark.master_port)),
        *("--webui-port", str(spark.master_ui_port)),
    ]


def worker_command(settings: Settings, config: Path, number: int, work_dir: Path) -> list[str]:
    """Worker ``number`` (from 1) in the foreground on loopback, joined to the master."""
    spark = settings.spark
    return [
        *_java(settings, config, WORKER_CLASS),
        *("--host", "127.0.0.1", "--port", str(spark.worker_port + number - 1)),
        *("--webui-port", str(spark.master_ui_port + number)),
        *("--cores", str(spark.worker_cores), "--memory", spark.worker_memory),
        *("--work-dir", str(work_dir)),
        f"spark://127.0.0.1:{spark.master_port}",
    ]


def _env(settings: Settings) -> dict[str, str]:
    return {
        AUTH_SECRET_ENV: settings.spark.auth_secret.get_secret_value(),
        "SPARK_HOME": str(spark_home()),
        # What spark-class's load-spark-env.sh sets: a worker's launcher needs it to build
        # an executor's class path from a Spark without build directories (pyspark's).
        "SPARK_SCALA_VERSION": "2.13",
        "SPARK_LOCAL_IP": "127.0.0.1",
        # Executors start Python workers with this interpreter: the project's environment,
        # as a cluster's nodes run the project's image.
        "PYSPARK_PYTHON": sys.executable,
        "MALLOC_ARENA_MAX": "4",
    }


def master_process(settings: Settings) -> ManagedProcess:
    config = write_config(_home(settings) / "conf")
    argv = master_command(settings, config)
    ports = (settings.spark.master_port, settings.spark.master_ui_port)
    return jvm_process(settings, MASTER, argv, config, ports, env=_env(settings))


def worker_process(settings: Settings, number: int) -> ManagedProcess:
    home = _home(settings)
    config = write_config(home / "conf")
    work = home / f"worker-{number}"
    work.mkdir(parents=True, exist_ok=True)
    argv = worker_command(settings, config, number, work)
    # The work directory is in the command line: it tells this worker's pid from the other's.
    ports = (settings.spark.worker_port + number - 1, settings.spark.master_ui_port + number)
    return jvm_process(settings, f"spark-worker-{number}", argv, work, ports, env=_env(settings))


@dataclass(frozen=True)
class ClusterState:
    """What the master says of its cluster."""

    status: str
    workers: list[dict[str, Any]]
    """Each worker: ``host``, ``port``, ``state`` (ALIVE, DEAD), ``cores``, ``coresused``,
    ``memory``, ``memoryused`` (MiB)."""
    apps: list[dict[str, Any]]
    """Each running application: ``name``, ``cores``, ``state``, ``duration``."""

    def worker(self, port: int) -> dict[str, Any] | None:
        alive = [w for w in self.workers if w.get("port") == port and w.get("state") == "ALIVE"]
        return alive[0] if alive else None


def cluster_state(settings: Settings) -> tuple[ClusterState | None, str]:
    """The master's JSON status page: (state, "") or (None, why not)."""
    import httpx

    port = settings.spark.master_ui_port
    if not port_open(port):
        return None, f"nothing listening on 127.0.0.1:{port}"
    try:
        page = httpx.get(f"http://127.0.0.1:{port}/json/", timeout=5).json()
    except (httpx.HTTPError, ValueError) as exc:
        return None, f"master status page failed: {exc}"
    return ClusterState(page.get("status", "?"), page["workers"], page["activeapps"]), ""


def master_healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: the master is ALIVE; detail: its workers and the applications' cores."""
    state, why = cluster_state(settings)
    if state is None:
        return False, why
    alive = [w for w in state.workers if w.get("state") == "ALIVE"]
    apps = ", ".join(f"{a['name']} ({a['cores']} cores)" for a in state.apps) or "none"
    detail = (
        f"{state.status}: {len(alive)} workers alive, "
        f"{sum(w['coresused'] for w in alive)}/{sum(w['cores'] for w in alive)} cores used; "
        f"applications: {apps}"
    )
    return state.status == "ALIVE", detail


def worker_healthy(settings: Settings, number: int) -> tuple[bool, str]:
    """Probe: the master lists this worker ALIVE; detail: its cores and executors' memory."""
    state, why = cluster_state(settings)
    if state is None:
        return False, f"master: {why}"
    worker = state.worker(settings.spark.worker_port + number - 1)
    if worker is None:
        return False, "not registered with the master"
    return True, (
        f"ALIVE: {worker['coresused']}/{worker['cores']} cores, "
        f"{worker['memoryused']}/{worker['memory']} MiB in executors"
    )


def _standalone(settings: Settings) -> bool:
    return settings.spark.cluster == "standalone"


def _worker(number: int) -> Service:
    process: Callable[[Settings], ManagedProcess] = partial(worker_process, number=number)
    return Service(
        name=f"spark-worker-{number}",
        process=process,
        probe=partial(worker_healthy, number=number),
        requires=(MASTER,),
        enabled=_standalone,
    )


SERVICES: tuple[Service, ...] = (
    Service(name=MASTER, process=master_process, probe=master_healthy, enabled=_standalone),
    *(_worker(number) for number in range(1, WORKERS + 1)),
)
"""The master, then its workers; only with ``spark.cluster=standalone``."""
