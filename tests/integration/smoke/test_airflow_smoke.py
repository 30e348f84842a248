"""Airflow is real: every DAG in dags/ loads, and a DAG runs with dag.test().

Airflow lives in its own virtualenv (docs/versions.md), so these tests drive
it through that venv's python with a temporary AIRFLOW_HOME and a fresh
SQLite metadata database.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from core.settings import PROJECT_ROOT, Settings
from platformctl.airflow_venv import airflow_env, ensure_airflow_venv

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RUNNER = Path(__file__).parents[1] / "airflow_runner.py"


@pytest.fixture(scope="module")
def airflow(settings: Settings, tmp_path_factory: pytest.TempPathFactory):
    python = ensure_airflow_venv(
        settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
    )
    home = tmp_path_factory.mktemp("airflow_home")
    env = {**os.environ, **airflow_env(home, settings.airflow.dags_folder)}

    def run(*args: str, dags_folder: Path | None = None) -> tuple[int, dict]:
        run_env = env if dags_folder is None else env | airflow_env(home, dags_folder)
        proc = subprocess.run(
            [str(python), str(RUNNER), *args],
            env=run_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no result from airflow_runner {args}:\n{proc.stderr[-3000:]}"
        return proc.returncode, json.loads(lines[-1])

    return run


def test_every_dag_loads_without_import_errors(airflow, settings):
    code, result = airflow("load")
    assert result["import_errors"] == {}
    assert code == 0
    dag_files = sorted(settings.airflow.dags_folder.glob("*.py"))
    assert dag_files, "dags/ holds no DAG files"
    assert "platform_smoke" in result["dags"]
    # Every declared batch pipeline gets its four DAGs from the factory.
    from pipelines import PIPELINES

    for spec in PIPELINES:
        for kind in ("ingest", "views", "backfill", "maintenance"):
            assert f"{spec.name}_{kind}" in result["dags"]


def test_trivial_dag_runs_with_dag_test(airflow):
    code, result = airflow("test", "platform_smoke")
    assert result["state"] == "success", result
    assert result["tasks"] == {"produce": "success", "check": "success"}
    assert code == 0


def test_a_broken_dag_file_is_reported(airflow, tmp_path):
    (tmp_path / "broken.py").write_text("from airflow.sdk import dag\nraise ImportError('nope')\n")
    code, result = airflow("load", dags_folder=tmp_path)
    assert code == 1
    assert any("nope" in str(error) for error in result["import_errors"].values())
