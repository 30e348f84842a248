"""Airflow as a platform service, on a second, isolated platform.

up (api-server, dag-processor, scheduler) -> status -> a DAG run through the
real scheduler and LocalExecutor -> the asset-scheduled DAG it triggers ->
down, with its own state directory, AIRFLOW_HOME, api port and a dags folder
of trivial DAGs (no Spark), so it never disturbs the platform others use.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.settings import AirflowSettings, LocalSettings, Settings
from platformctl import airflow_rest, platform
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DAGS = """
from datetime import UTC, datetime

from airflow.sdk import Asset, dag, get_current_context, task

DONE = Asset(name="test.done", uri="test://platformctl/done")
START = datetime(2025, 1, 1, tzinfo=UTC)


@dag(dag_id="producer", schedule=None, start_date=START, catchup=False)
def producer():
    @task(outlets=[DONE])
    def produce() -> int:
        rows = get_current_context()["dag_run"].conf["rows"]
        if rows != 3:
            raise ValueError(f"conf not passed: rows={rows!r}")
        return rows

    produce()


@dag(dag_id="consumer", schedule=[DONE], start_date=START, catchup=False)
def consumer():
    @task
    def consume() -> None:
        pass

    consume()


producer()
consumer()
"""


@pytest.fixture
def isolated(settings: Settings, tmp_path: Path):
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "trivial.py").write_text(DAGS)
    isolated = settings.model_copy(
        update={
            "airflow": AirflowSettings(
                home=tmp_path / "airflow",
                venv=settings.airflow.venv,
                dags_folder=dags,
                api_port=free_port(),
            ),
            "local": LocalSettings(state_dir=tmp_path / "state"),
        }
    )
    yield isolated
    platform.down(isolated, platform.AIRFLOW_SERVICES)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_status_trigger_asset_run_down(isolated):
    started = time.monotonic()
    timings = platform.up(isolated, platform.AIRFLOW_SERVICES)
    up_seconds = time.monotonic() - started
    assert set(timings) == set(platform.AIRFLOW_SERVICES)

    rows = {r.name: r for r in platform.status(isolated) if r.name in platform.AIRFLOW_SERVICES}
    assert all(row.healthy for row in rows.values()), rows
    api = rows["airflow-api-server"]
    assert api.port == isolated.airflow.api_port
    assert f"http://127.0.0.1:{isolated.airflow.api_port}" in api.detail
    assert "log in as admin" in api.detail
    pids = [row.pid for row in rows.values()]
    assert all(pids) and len(set(pids)) == 3

    lines: list[str] = []
    before = datetime.now(UTC)
    state = airflow_rest.trigger_and_wait(
        isolated, "producer", {"rows": 3}, timeout_s=300, progress=lines.append
    )
    assert state == "success", lines
    assert lines[-1].startswith("producer manual__") and "produce success" in lines[-1], lines
    # The producer's asset update schedules the consumer (DAGs are active once parsed).
    consumer = airflow_rest.wait_for_next_run(isolated, "consumer", after=before, timeout_s=180)
    assert consumer == "success"

    assert airflow_rest.dag_summary(isolated) == (2, {})
    processor = {r.name: r for r in platform.status(isolated)}["airflow-dag-processor"]
    assert "2 DAGs, 0 import errors" in processor.detail
    print(f"\n[airflow] up in {up_seconds:.0f}s {timings}")

    assert sorted(platform.down(isolated, platform.AIRFLOW_SERVICES)) == sorted(
        platform.AIRFLOW_SERVICES
    )
    assert not any(_alive(pid) for pid in pids)
    assert not any(r.running for r in platform.status(isolated))
