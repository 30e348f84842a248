"""Local Airflow 3 as three processes: api-server, dag-processor and scheduler.

Pure builders, like the Kafka and Cassandra modules next to this one: the
argv of each component and of ``airflow db migrate``, and the environment all
of them share. :data:`SERVICES` puts them to work for ``platformctl``: one
record per component, each migrating the metadata DB before its first start
and probed through the api-server's health answer; the api-server's record
creates the DAGs' pools once it is healthy.

Every component runs from Airflow's own venv with ``os.environ`` + the
``WAP_*`` settings (the DAGs' spark-submit tasks read them) +
:func:`platformctl.airflow_venv.airflow_env`, plus what makes it a local
service:

* the api-server listens on 127.0.0.1 only, on ``settings.airflow.api_port``,
  and task supervisors reach its execution API there (Airflow's default is
  ``http://localhost:8080`` whatever the port);
* LocalExecutor with ``settings.airflow.parallelism`` workers over the SQLite
  metadata DB, and one DAG-parsing process: little CPU on a small machine;
* DAGs are active once parsed, so an asset-scheduled DAG (``P_views``) runs
  as soon as its upstream DAG (``P_ingest``) updates the asset;
* the scheduler serves no task logs over HTTP (``--skip-serve-logs``): the
  api-server reads them from ``AIRFLOW_HOME/logs`` on the same disk, and no
  second port is taken.

Login (Airflow 3's SimpleAuthManager): one ``admin`` user whose password is
``settings.airflow.admin_password`` (``WAP_AIRFLOW__ADMIN_PASSWORD``),
written before each start into :func:`passwords_file` (mode 0600), which
Airflow reads instead of generating one. No visitor is admin without it
(``simple_auth_manager_all_admins`` is off): ``/auth/token`` hands a token
only for the password, so neither another local user nor a web page gets
one. ``platformctl``'s REST client (:mod:`platformctl.airflow_rest`) asks
for its token with the same setting. Outside ``environment=local`` the
development password is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from contextlib import closing
from functools import partial
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import PROJECT_ROOT, AirflowSettings, Settings, settings_env
from platformctl.airflow_venv import airflow_env
from platformctl.install import install_airflow
from platformctl.process import ManagedProcess, ServiceStartError
from platformctl.services.base import Service, logs_dir, run_dir

__all__ = [
    "COMPONENTS",
    "HOST",
    "NAMES",
    "SERVICES",
    "airflow_cli",
    "api_url",
    "healthy",
    "login_hint",
    "migrate_command",
    "passwords_file",
    "process",
    "process_title",
    "server_command",
    "service_env",
    "write_passwords",
]

COMPONENTS = ("api-server", "dag-processor", "scheduler")
"""The ``airflow`` subcommands of the service, in start order (the probes ask the api-server)."""
HOST = "127.0.0.1"
"""The only interface the api-server listens on."""
NAMES = tuple(f"airflow-{component}" for component in COMPONENTS)
"""The services' names: ``up airflow`` stands for all three."""
_log = get_logger(__name__)


def airflow_cli(venv: Path) -> Path:
    """The ``airflow`` command of Airflow's venv."""
    return venv / "bin" / "airflow"


def api_url(airflow: AirflowSettings) -> str:
    """Base URL of the local api-server (UI and REST API)."""
    return f"http://{HOST}:{airflow.api_port}"


USER = "admin"
"""The one user of the local Airflow (role admin)."""
_DEV_PASSWORD = AirflowSettings().admin_password


def passwords_file(airflow_home: Path) -> Path:
    """The users' passwords SimpleAuthManager reads (``{"admin": ...}``)."""
    return airflow_home / "simple_auth_manager_passwords.json"


def write_passwords(settings: Settings) -> Path:
    """:func:`passwords_file` with ``settings.airflow.admin_password``, readable by its owner
    only; refuses the development password outside ``environment=local``."""
    airflow = settings.airflow
    if settings.environment != "local" and airflow.admin_password == _DEV_PASSWORD:
        raise ServiceStartError(
            f"environment={settings.environment} with the local development Airflow password: "
            "set WAP_AIRFLOW__ADMIN_PASSWORD."
        )
    path = passwords_file(airflow.home)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(json.dumps({USER: airflow.admin_password.get_secret_value()}) + "\n")
    return path


def login_hint(settings: Settings) -> str:
    """How to log in to the UI, for ``status``."""
    return f"log in as {USER} with WAP_AIRFLOW__ADMIN_PASSWORD"


def server_command(venv: Path, component: str, pid_file: Path, *, port: int) -> list[str]:
    """argv of one component, in the foreground.

    Airflow ignores ``--pid`` unless it daemonises; it names our pid file so
    that the command line proves the process is ours.
    """
    if component not in COMPONENTS:
        raise ValueError(f"Unknown Airflow component {component!r}; expected one of {COMPONENTS}.")
    argv = [str(airflow_cli(venv)), component, "--pid", str(pid_file)]
    if component == "api-server":
        argv += ["--host", HOST, "--port", str(port)]
    elif component == "scheduler":
        argv.append("--skip-serve-logs")
    return argv


def process_title(port: int) -> str:
    """The title the api-server gives itself (setproctitle), replacing its command line."""
    return f"airflow api_server -- host:{HOST} port:{port}"


def migrate_command(venv: Path) -> list[str]:
    """argv of ``airflow db migrate``: creates or upgrades the metadata DB and airflow.cfg."""
    return [str(airflow_cli(venv)), "db", "migrate"]


def service_env(settings: Settings) -> dict[str, str]:
    """Environment of every Airflow process (and ``db migrate``), over ``os.environ``."""
    airflow = settings.airflow
    return {
        **settings_env(settings),
        **airflow_env(airflow.home, airflow.dags_folder, settings.spark.master),
        "AIRFLOW__API__HOST": HOST,
        "AIRFLOW__API__PORT": str(airflow.api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api_url(airflow)}/execution/",
        "AIRFLOW__CORE__PARALLELISM": str(airflow.parallelism),
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(airflow.dag_reparse_s),
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords_file(airflow.home)),
    }


def process(settings: Settings, component: str) -> ManagedProcess:
    """One Airflow component, run from Airflow's venv."""
    pid_file = run_dir(settings) / f"airflow-{component}.pid"
    api_server = component == "api-server"
    return ManagedProcess(
        name=f"airflow-{component}",
        argv=server_command(
            settings.airflow.venv, component, pid_file, port=settings.airflow.api_port
        ),
        pid_file=pid_file,
        log_file=logs_dir(settings) / f"airflow-{component}.log",
        marker=str(pid_file),
        title=process_title(settings.airflow.api_port) if api_server else None,
        ports=(settings.airflow.api_port,) if api_server else (),
        env=service_env(settings),
        cwd=PROJECT_ROOT,
    )


def healthy(settings: Settings, component: str) -> tuple[bool, str]:
    """Probe: the api-server's health answer says this component is healthy."""
    from platformctl import airflow_rest  # here: airflow_rest imports this module

    try:
        answer = airflow_rest.health(settings)
    except Exception as exc:  # not listening yet, or an error while the DB is migrated
        return False, f"health check failed: {exc}"
    started_at = process(settings, component).started_at()
    ok, detail = airflow_rest.component_health(answer, component, started_at)
    if not ok:
        return False, detail
    if component == "api-server":
        return True, f"UI {api_url(settings.airflow)} ({login_hint(settings)}); {detail}"
    if component == "scheduler":
        return True, f"{detail}; LocalExecutor, parallelism {settings.airflow.parallelism}"
    try:
        dags, errors = airflow_rest.dag_summary(settings)
    except Exception as exc:  # the count is a detail: the heartbeat decides health
        return True, f"{detail}; DAGs unknown ({exc})"
    broken = f": {errors}" if errors else ""
    return True, f"{detail}; {dags} DAGs, {len(errors)} import errors{broken}"


def _prepare(settings: Settings) -> None:
    """Before each start: the admin password from the settings, the metadata DB migrated."""
    write_passwords(settings)
    _migrate_once(settings)


def _migrate_once(settings: Settings) -> None:
    """``airflow db migrate`` unless done with this Airflow lock; SQLite in WAL mode."""
    lock = hashlib.sha256((PROJECT_ROOT / "requirements" / "airflow.lock").read_bytes())
    database, stamp = settings.airflow.home / "airflow.db", settings.airflow.home / ".migrated"
    if database.exists() and stamp.exists() and stamp.read_text() == lock.hexdigest():
        return
    settings.airflow.home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = subprocess.run(
        migrate_command(settings.airflow.venv),
        env={**os.environ, **service_env(settings)},
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


def _provision_pools(settings: Settings) -> None:
    """Every pool the DAGs name (tasks of a missing pool are never scheduled)."""
    from pipelines import DERIVED, PIPELINES
    from platformctl.airflow_rest import ensure_pool  # here: airflow_rest imports this module

    changed = [
        spec.pool
        for spec in (*PIPELINES, *DERIVED)
        if ensure_pool(settings, spec.pool, 1, f"{spec.name}: one batch step at a time")
    ]
    log_event(_log, "airflow.pools_provisioned", changed=changed)


SERVICES = tuple(
    Service(
        name=name,
        process=partial(process, component=component),
        probe=partial(healthy, component=component),
        # The dag-processor and the scheduler report their health through the api-server.
        requires=() if component == "api-server" else ("airflow-api-server",),
        install=install_airflow,
        prepare=_prepare,
        provision=_provision_pools if component == "api-server" else None,
    )
    for name, component in zip(NAMES, COMPONENTS, strict=True)
)
"""One record per component, in start order (``down`` stops the scheduler first)."""
