"""The local Airflow's command lines and environment (pure builders, nothing started)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from core.settings import (
    AirflowSettings,
    CollectorSettings,
    MonitoringSettings,
    ServingSettings,
    Settings,
    SparkSettings,
    SqlSettings,
)
from platformctl.process import ServiceStartError
from platformctl.services import airflow

VENV = Path("/opt/af-venv")


def _settings(**overrides) -> Settings:
    airflow_settings = AirflowSettings(
        home=Path("/srv/af-home"), venv=VENV, dags_folder=Path("/srv/dags"), api_port=18080
    )
    return Settings(airflow=airflow_settings, spark=SparkSettings(master="local[1]"), **overrides)


def _dev_settings() -> Settings:
    return _settings(
        environment="dev",
        collector=CollectorSettings(write_keys={"site": SecretStr("dev-write-key-0001")}),
        serving=ServingSettings(api_tokens={"analyst": SecretStr("dev-analyst-token-0001")}),
        sql=SqlSettings(token=SecretStr("dev-sql-token-0001")),
        monitoring=MonitoringSettings(metrics_token=SecretStr("dev-metrics-token-0001")),
    )


def test_api_server_listens_on_loopback_on_the_configured_port():
    argv = airflow.server_command(VENV, "api-server", Path("/state/run/a.pid"), port=18080)
    assert argv == [
        "/opt/af-venv/bin/airflow",
        "api-server",
        "--pid",
        "/state/run/a.pid",
        "--host",
        "127.0.0.1",
        "--port",
        "18080",
    ]
    # The title the api-server sets for itself names the same host and port.
    assert airflow.process_title(18080) == "airflow api_server -- host:127.0.0.1 port:18080"


def test_scheduler_serves_no_logs_and_dag_processor_takes_no_port():
    scheduler = airflow.server_command(VENV, "scheduler", Path("/r/s.pid"), port=18080)
    processor = airflow.server_command(VENV, "dag-processor", Path("/r/d.pid"), port=18080)
    assert scheduler == [
        "/opt/af-venv/bin/airflow",
        "scheduler",
        "--pid",
        "/r/s.pid",
        "--skip-serve-logs",
    ]
    assert processor == ["/opt/af-venv/bin/airflow", "dag-processor", "--pid", "/r/d.pid"]
    assert airflow.migrate_command(VENV) == ["/opt/af-venv/bin/airflow", "db", "migrate"]


def test_unknown_component_is_refused():
    with pytest.raises(ValueError, match=r"'triggerer'.*api-server"):
        airflow.server_command(VENV, "triggerer", Path("/r/t.pid"), port=8080)


def test_service_env_points_tasks_at_the_local_execution_api():
    env = airflow.service_env(_settings())
    assert env["AIRFLOW_HOME"] == "/srv/af-home"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/srv/dags"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == "sqlite:////srv/af-home/airflow.db"
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert env["AIRFLOW__API__PORT"] == "18080"
    assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == "http://127.0.0.1:18080/execution/"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "2"
    assert env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] == "120"
    assert env["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] == "False"
    assert json.loads(env["AIRFLOW_CONN_SPARK_PLATFORM"])["host"] == "local[1]"


def test_service_env_carries_the_settings_for_the_spark_submit_tasks():
    env = airflow.service_env(_settings())
    assert env["WAP_ENVIRONMENT"] == "local"
    assert json.loads(env["WAP_SPARK"])["master"] == "local[1]"
    assert json.loads(env["WAP_AIRFLOW"])["api_port"] == 18080


def test_no_visitor_is_admin_without_the_password_from_settings(tmp_path):
    for settings in (_settings(), _dev_settings()):
        env = airflow.service_env(settings)
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS"] == "False"
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"] == "admin:admin"
        assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"] == (
            "/srv/af-home/simple_auth_manager_passwords.json"
        )
        assert airflow.login_hint(settings) == "log in as admin with WAP_AIRFLOW__ADMIN_PASSWORD"
    airflow_settings = AirflowSettings(home=tmp_path, admin_password="s3cret-pass-of-this-test")
    local = _settings().model_copy(update={"airflow": airflow_settings})
    written = airflow.write_passwords(local)
    assert json.loads(written.read_text()) == {"admin": "s3cret-pass-of-this-test"}
    assert stat.S_IMODE(written.stat().st_mode) == 0o600


def test_the_development_password_is_refused_outside_local(tmp_path):
    dev = _dev_settings().model_copy(update={"airflow": AirflowSettings(home=tmp_path)})
    with pytest.raises(ServiceStartError, match="WAP_AIRFLOW__ADMIN_PASSWORD"):
        airflow.write_passwords(dev)
    chosen = dev.model_copy(
        update={"airflow": AirflowSettings(home=tmp_path, admin_password="chosen-one-of-this-test")}
    )
    assert airflow.write_passwords(chosen).exists()


def test_defaults_fit_a_small_machine():
    defaults = AirflowSettings()
    assert (defaults.api_port, defaults.parallelism) == (8080, 2)
    assert airflow.api_url(defaults) == "http://127.0.0.1:8080"
