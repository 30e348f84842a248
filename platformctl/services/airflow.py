"""Local Airflow 3 as three processes: api-server, dag-processor and scheduler.

Pure builders, like the Kafka and Cassandra modules next to this one: the
argv of each component and of ``airflow db migrate``, and the environment all
of them share. Nothing is started here.

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

Login (Airflow 3's SimpleAuthManager): with ``environment=local`` every
visitor is admin (``simple_auth_manager_all_admins``). The api-server only
listens on the loopback interface, so only users of this machine reach it,
and neither the UI nor the REST client needs a password. In any other
environment the ``admin`` user logs in with the password Airflow generates
into :func:`passwords_file`.
"""

from __future__ import annotations

from pathlib import Path

from core.settings import AirflowSettings, Settings, settings_env
from platformctl.airflow_venv import airflow_env

__all__ = [
    "COMPONENTS",
    "HOST",
    "airflow_cli",
    "all_admins",
    "api_url",
    "login_hint",
    "migrate_command",
    "passwords_file",
    "process_title",
    "server_command",
    "service_env",
]

COMPONENTS = ("api-server", "dag-processor", "scheduler")
"""The ``airflow`` subcommands of the service, in start order (the probes ask the api-server)."""
HOST = "127.0.0.1"
"""The only interface the api-server listens on."""


def airflow_cli(venv: Path) -> Path:
    """The ``airflow`` command of Airflow's venv."""
    return venv / "bin" / "airflow"


def api_url(airflow: AirflowSettings) -> str:
    """Base URL of the local api-server (UI and REST API)."""
    return f"http://{HOST}:{airflow.api_port}"


def all_admins(settings: Settings) -> bool:
    """Whether every visitor is admin: only for ``environment=local`` (loopback only)."""
    return settings.environment == "local"


def passwords_file(airflow_home: Path) -> Path:
    """Where SimpleAuthManager writes the generated passwords when login is required."""
    return airflow_home / "simple_auth_manager_passwords.json.generated"


def login_hint(settings: Settings) -> str:
    """How to log in to the UI, for ``status``."""
    if all_admins(settings):
        return "no login: every local visitor is admin"
    return f"log in as admin, password in {passwords_file(settings.airflow.home)}"


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
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": str(all_admins(settings)),
    }
