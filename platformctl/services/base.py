"""What a local service is to the platform: one :class:`Service` record.

``up``, ``down`` and ``status`` (:mod:`platformctl.platform`) loop over the
records of :data:`platformctl.services.REGISTRY` and know no service by name.
The helpers below are shared by the service modules: where pid files and logs
live, a process run from this Python environment, and an HTTP ``/health`` probe.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from core.settings import PROJECT_ROOT, Settings, settings_env
from platformctl.process import ManagedProcess, port_open

__all__ = [
    "Probe",
    "Service",
    "http_health",
    "jvm_process",
    "logs_dir",
    "python_process",
    "run_dir",
]

Probe = Callable[[Settings], tuple[bool, str]]
"""(healthy, one line of detail) for ``up`` (waits until healthy) and ``status``."""


@dataclass(frozen=True)
class Service:
    """One local service: how to run it, how to tell it is healthy, and its own steps.

    ``up`` first runs the ``install`` of the services asked for (each distinct
    one once), then for each service in order: unless it is running and
    healthy, ``prepare`` then start then wait for ``ready`` (by default the
    ``probe``); then, running anyway, ``provision``. Every step is idempotent.
    A service the settings do not run (``enabled``) is neither started by
    ``up`` nor listed by ``status``, unless it is running.
    """

    name: str
    """The name on the command line and in the pid and log file names."""
    process: Callable[[Settings], ManagedProcess]
    """Builds the process (argv, pid file, log, ports, env), rendering its config files."""
    probe: Probe
    requires: tuple[str, ...] = ()
    """The services it needs up before it starts; the registry puts them earlier."""
    install: Callable[[Settings], Any] | None = None
    """Fetches what it runs from (jars, a venv) when missing or out of date."""
    prepare: Callable[[Settings], None] | None = None
    """A one-time step before its first start (storage format, metadata DB migration)."""
    provision: Callable[[Settings], None] | None = None
    """Creates from code what others need of it once healthy (topics, tables, pools)."""
    enabled: Callable[[Settings], bool] | None = None
    """Whether these settings run it (the nodes of an optional cluster); None: always."""
    ready: Probe | None = None
    """What ``up`` waits for after starting it before it goes on, when less than ``probe``:
    a member of a quorum is not healthy before the members started after it."""
    quorum: str | None = None
    """The quorum it votes in (the nodes of a local Kafka cluster): ``down`` stops the members
    it stops at once, as each needs the others' votes while it shuts down (the last one
    left alone would wait for a quorum it cannot have)."""

    def runs_with(self, settings: Settings) -> bool:
        """Whether ``up`` starts it with these settings."""
        return self.enabled is None or self.enabled(settings)


def logs_dir(settings: Settings) -> Path:
    """Where every service's log is written."""
    return settings.local.state_dir / "logs"


def run_dir(settings: Settings) -> Path:
    """Where every service's pid file is written."""
    return settings.local.state_dir / "run"


def jvm_process(
    settings: Settings,
    name: str,
    argv: list[str],
    config: Path,
    ports: tuple[int, ...],
    env: Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
) -> ManagedProcess:
    """A JVM server on ``host`` whose output goes to ``<name>.out``; the path of its config
    (in its command line) proves the pid is ours."""
    return ManagedProcess(
        name=name,
        argv=argv,
        pid_file=run_dir(settings) / f"{name}.pid",
        log_file=logs_dir(settings) / f"{name}.out",
        marker=str(config),
        ports=ports,
        host=host,
        env=env or {},
    )


def python_process(
    settings: Settings, name: str, module_args: list[str], ports: tuple[int, ...] = ()
) -> ManagedProcess:
    """``python -m <module_args> --instance <state>/<name>`` from this environment, with
    these settings in its environment; the instance directory proves the pid is ours."""
    instance = str(settings.local.state_dir / name)
    return ManagedProcess(
        name=name,
        argv=[sys.executable, "-m", *module_args, "--instance", instance],
        pid_file=run_dir(settings) / f"{name}.pid",
        log_file=logs_dir(settings) / f"{name}.log",
        marker=f"--instance {instance}",
        ports=ports,
        env=settings_env(settings),
        cwd=PROJECT_ROOT,
    )


def http_health(host: str, port: int, token: SecretStr | None = None) -> tuple[Any, str]:
    """``GET /health`` on a local HTTP service: (the answer, "") or (None, why not).
    ``token``: the bearer token its figures take (``monitoring.metrics_token``)."""
    import httpx

    host = "127.0.0.1" if host == "0.0.0.0" else host
    if not port_open(port, host):
        return None, f"nothing listening on {host}:{port}"
    try:
        bearer = {} if token is None else {"Authorization": f"Bearer {token.get_secret_value()}"}
        return httpx.get(f"http://{host}:{port}/health", headers=bearer, timeout=5), ""
    except httpx.HTTPError as exc:
        return None, f"/health failed: {exc}"
