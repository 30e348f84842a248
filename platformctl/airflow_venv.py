"""Airflow's own virtualenv and the environment to run Airflow locally.

Airflow lives in a separate venv (``.platform/airflow-venv``) because
``apache-airflow-providers-apache-spark`` 6.x depends on ``pyspark-client``,
which installs into the same ``pyspark`` import path as the full ``pyspark``
of the main ``.venv``. Airflow never runs a Spark driver itself: it calls the
main venv's ``spark-submit`` (SparkSubmitOperator).

The venv is built from ``requirements/airflow.lock`` with ``uv pip sync`` and
is rebuilt only when the lock (or the stamp's other inputs) change. Stdlib only,
so it can run before any venv exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["UV_VERSION", "airflow_env", "ensure_airflow_venv", "venv_python"]

UV_VERSION = "0.13.9"
_STAMP_NAME = ".platform-stamp.json"
_STARLETTE_HTTPX_WARNING = "Using `httpx` with `starlette.testclient` is deprecated"


def _log(event: str, **fields: object) -> None:
    """Print one structured (JSON) progress line to stderr."""
    print(json.dumps({"event": event, **fields}, default=str), file=sys.stderr, flush=True)


def _run(step: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
    """Run one build step, failing loudly; its own output goes straight through."""
    started = time.monotonic()
    subprocess.run(cmd, check=True, env=env)
    _log("airflow_venv.step", step=step, seconds=round(time.monotonic() - started, 2))


def venv_python(venv_dir: Path) -> Path:
    """Path of the interpreter inside ``venv_dir`` (POSIX layout)."""
    return venv_dir / "bin" / "python"


def _wanted_stamp(lock_file: Path, project_root: Path, python: str) -> dict[str, object]:
    """What the venv must have been built from for it to be reused as is."""
    pyproject = project_root / "pyproject.toml"
    return {
        "lock_sha256": hashlib.sha256(lock_file.read_bytes()).hexdigest(),
        "uv": UV_VERSION,
        "bytecode": True,  # compiled at install: see platformctl.install.COMPILE_BYTECODE
        "base_python": str(Path(python).resolve()),
        "editable_project": (project_root / "pyproject.toml").is_file(),
        # The editable install maps the project's packages as pyproject lists them.
        "pyproject_sha256": (
            hashlib.sha256(pyproject.read_bytes()).hexdigest() if pyproject.is_file() else None
        ),
    }


def ensure_airflow_venv(
    venv_dir: Path, lock_file: Path, project_root: Path, *, python: str = sys.executable
) -> Path:
    """Create or refresh Airflow's venv from ``lock_file``; return its python.

    Nothing is done when the venv's stamp matches the lock's sha256 (and uv
    version, base interpreter, editable-project flag). Otherwise: the venv is
    created with ``python`` if missing, ``uv`` is pip-installed into it,
    ``uv pip sync`` makes it match the lock exactly, and, if
    ``project_root/pyproject.toml`` exists, the project is installed editable
    with ``--no-deps`` so DAG files can import its pure-Python modules.
    """
    venv_dir, lock_file = venv_dir.resolve(), lock_file.resolve()
    project_root = project_root.resolve()
    vpy, stamp_file = venv_python(venv_dir), venv_dir / _STAMP_NAME
    wanted = _wanted_stamp(lock_file, project_root, python)
    try:
        current = json.loads(stamp_file.read_text())
    except (OSError, ValueError):
        current = None
    if vpy.exists() and current == wanted:
        _log("airflow_venv.up_to_date", venv=venv_dir, lock_sha256=wanted["lock_sha256"])
        return vpy

    started = time.monotonic()
    other_base = current is not None and current.get("base_python") != wanted["base_python"]
    reason = "missing" if not vpy.exists() else "other_base_python" if other_base else "stale"
    _log("airflow_venv.build", venv=venv_dir, lock=lock_file, reason=reason)
    stamp_file.unlink(missing_ok=True)  # a half-done build must not look complete
    if reason != "stale":
        # pip comes from ensurepip (no network); --clear empties a venv of another base.
        _run("create_venv", [python, "-m", "venv", "--clear", str(venv_dir)])
    pip = [str(vpy), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run("install_uv", [*pip, f"uv=={UV_VERSION}"])
    # uv must not pick up another interpreter, project or config file by itself.
    uv_env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_CONFIG": "1"}
    uv_env.pop("VIRTUAL_ENV", None)
    uv_pip = [str(venv_dir / "bin" / "uv"), "pip"]
    sync = [*uv_pip, "sync", "--compile-bytecode", "--python", str(vpy), str(lock_file)]
    _run("uv_pip_sync", sync, env=uv_env)
    if wanted["editable_project"]:
        editable = ["--no-deps", "--editable", str(project_root)]
        _run("install_project", [*uv_pip, "install", "--python", str(vpy), *editable], env=uv_env)
    stamp_file.write_text(json.dumps(wanted, indent=2) + "\n")
    seconds = round(time.monotonic() - started, 1)
    _log("airflow_venv.ready", venv=venv_dir, python=vpy, seconds=seconds)
    return vpy


def airflow_env(
    airflow_home: Path, dags_folder: Path, spark_master: str = "local[2]"
) -> dict[str, str]:
    """Environment variables to run Airflow locally, offline and quietly.

    SQLite metadata DB under ``airflow_home``; to be merged over
    ``os.environ`` for the Airflow venv's processes only. Airflow writes
    ``airflow_home/airflow.cfg`` (with a generated fernet key and JWT secret)
    on first start. Airflow 3.3 has no usage-data telemetry and no lineage
    backend by default, and ``db migrate`` creates no demo connections, so
    nothing else needs switching off to run offline.
    """
    airflow_home, dags_folder = airflow_home.resolve(), dags_folder.resolve()
    return {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Four slashes: sqlite:/// + an absolute path.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
        # Airflow 3's default; works with SQLite (no SequentialExecutor any more).
        # dag.test() ignores it: it runs tasks in-process unless use_executor=True.
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        # Airflow's API/DB code imports svcs -> fastapi.testclient, where the locked
        # starlette warns about httpx on every start: harmless, so silence that one.
        "PYTHONWARNINGS": f"ignore:{_STARLETTE_HTTPX_WARNING}:UserWarning",
        # The Spark master the DAGs' spark-submit tasks use (WAP_SPARK__MASTER).
        "AIRFLOW_CONN_SPARK_PLATFORM": json.dumps({"conn_type": "spark", "host": spark_master}),
    }
