"""Drive Airflow from inside its own venv, for integration tests.

Run with the AIRFLOW venv's python (``.platform/airflow-venv/bin/python``), never
the main ``.venv``, and with the environment from
``platformctl.airflow_venv.airflow_env(...)`` merged over ``os.environ``::

    python tests/integration/airflow_runner.py load
    python tests/integration/airflow_runner.py test platform_smoke
    python tests/integration/airflow_runner.py test web_events_backfill --conf '{"start": ...}'

Each subcommand migrates the SQLite metadata DB first if it is not at head, then
prints exactly one JSON line on stdout (Airflow's own logs go to stderr) and
exits 1 on failure:

* ``load``: parse every DAG file in ``[core] dags_folder`` as the DAG processor
  does (``BundleDagBag``: the folder on ``sys.path``) and serialize each DAG ->
  ``{"dags": [...], "import_errors": {...}, "warnings": {...}, ...}``.
* ``test DAG_ID [--conf JSON]``: run ``dag.test(run_conf=...)`` (tasks run
  in-process, no scheduler or executor) ->
  ``{"dag_id", "run_id", "state", "tasks": {task_id: state}, "tries": {task_id: try
  number}, ...}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main"]

# Python put this script's folder first on sys.path; Airflow's own processes do not
# have it, and its subfolders (``pipelines/`` among them) would shadow the project's
# packages of the same name as namespace packages.
if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]


def _emit(payload: dict[str, Any]) -> None:
    """Write the single result line on the real stdout."""
    sys.__stdout__.write(json.dumps(payload, default=str, sort_keys=True) + "\n")
    sys.__stdout__.flush()


def _migrate_if_needed() -> dict[str, Any]:
    """Run ``airflow db migrate`` unless the metadata DB is already at head."""
    from airflow.utils.db import check_migrations

    started = time.monotonic()
    try:
        check_migrations(timeout=1)  # at most one 1 s wait when migrations are missing
        return {"migrated": False, "migrate_seconds": round(time.monotonic() - started, 2)}
    except TimeoutError:
        pass
    airflow_cli = os.path.join(os.path.dirname(sys.executable), "airflow")
    # Its log lines go to stderr so that our stdout stays one JSON line.
    subprocess.run([airflow_cli, "db", "migrate"], check=True, stdout=sys.stderr)
    return {"migrated": True, "migrate_seconds": round(time.monotonic() - started, 2)}


def _dagbag():  # -> airflow.dag_processing.dagbag.BundleDagBag
    from airflow.configuration import conf
    from airflow.dag_processing.dagbag import BundleDagBag  # Airflow >= 3.2 location

    # The DAG processor's own class: the DAG folder on sys.path, as DAG files expect.
    folder = Path(conf.get("core", "dags_folder"))
    return BundleDagBag(dag_folder=folder, bundle_path=folder, safe_mode=False)


def cmd_load() -> int:
    """Parse and serialize every DAG; fail on any import or serialization error."""
    from airflow.serialization.serialized_objects import DagSerialization

    result = _migrate_if_needed()
    started = time.monotonic()
    bag = _dagbag()
    errors = dict(bag.import_errors)
    for dag_id, dag in bag.dags.items():
        try:
            DagSerialization.serialize_dag(dag)
        except Exception as exc:  # reported as an error, not swallowed
            errors[f"{dag.relative_fileloc or dag.fileloc} ({dag_id})"] = f"serialization: {exc!r}"
    result.update(
        dags=sorted(bag.dag_ids),
        import_errors=errors,
        warnings={k: list(v) for k, v in bag.captured_warnings.items()},
        load_seconds=round(time.monotonic() - started, 2),
    )
    _emit(result)
    return 1 if errors else 0


def cmd_test(dag_id: str, conf: dict[str, Any] | None = None) -> int:
    """Run one DagRun of ``dag_id`` with ``dag.test()``; fail unless it succeeds."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    result = _migrate_if_needed()
    bag = _dagbag()
    dag = bag.dags.get(dag_id)
    if dag is None:
        errors = bag.import_errors
        _emit({**result, "dag_id": dag_id, "state": "not_found", "import_errors": errors})
        return 1
    started = time.monotonic()
    dag_run = dag.test(run_conf=conf)
    with create_session() as session:
        query = select(TaskInstance).where(
            TaskInstance.dag_id == dag_id, TaskInstance.run_id == dag_run.run_id
        )
        instances = list(session.scalars(query))
        tasks = {ti.task_id: str(ti.state) for ti in instances}
        tries = {ti.task_id: ti.try_number for ti in instances}
    state = str(dag_run.state)
    result.update(
        dag_id=dag_id,
        run_id=dag_run.run_id,
        state=state,
        tasks=tasks,
        tries=tries,
        test_seconds=round(time.monotonic() - started, 2),
    )
    _emit(result)
    return 0 if state == "success" and all(s == "success" for s in tasks.values()) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("load", help="parse every DAG in the dags folder")
    test = sub.add_parser("test", help="run one DAG with dag.test()")
    test.add_argument("dag_id")
    test.add_argument("--conf", type=json.loads, default=None, help="the run's params, as JSON")
    args = parser.parse_args(argv)
    if "AIRFLOW_HOME" not in os.environ:  # else Airflow would write into ~/airflow
        parser.error("run with the environment from platformctl.airflow_venv.airflow_env()")
    # Keep stdout for the one JSON result line: anything Airflow prints goes to stderr.
    sys.stdout = sys.stderr
    return cmd_load() if args.command == "load" else cmd_test(args.dag_id, args.conf)


if __name__ == "__main__":
    sys.exit(main())
