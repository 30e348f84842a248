"""A batch pipeline of its own per test: topic, lake, keyspace and report folder."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import (
    PROJECT_ROOT,
    BatchSettings,
    KafkaSettings,
    LakeSettings,
    Settings,
    settings_env,
)
from platformctl.airflow_venv import airflow_env, ensure_airflow_venv
from tests.support.ports import free_port
from tests.support.step_server import StepServerProcess


@pytest.fixture
def lake_settings(local_platform: Settings, kafka_topic: str, tmp_path) -> Settings:
    """Settings with this test's topic (its DLQ and suppression list) and a lake under tmp_path."""
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    kafka = KafkaSettings(
        **(
            local_platform.kafka.model_dump()
            | {
                "events_topic": kafka_topic,
                "dlq_topic": f"{kafka_topic}.dlq",
                "suppressions_topic": f"{kafka_topic}.suppressions",
            }
        )
    )
    ensure_topics(AdminClient(kafka.client_config()), platform_topics(kafka))
    return local_platform.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "batch": BatchSettings(reports_dir=tmp_path / "quality", lateness_s=60),
        }
    )


@pytest.fixture
def pipeline_settings(lake_settings: Settings, laid_out_keyspaces) -> Iterator[Settings]:
    """``lake_settings`` plus a keyspace of its own holding every table of the layout."""
    with laid_out_keyspaces.lend(lake_settings) as settings:
        yield settings


@pytest.fixture
def run_pipeline(spark):
    """``run_pipeline(settings, run_id, dates=None)``: every step in order, in-process."""
    from batch_layer.runner import run_step
    from batch_layer.steps import THROUGH_PUBLISH
    from tests.support.web import WEB_EVENTS

    def run(settings: Settings, run_id: str, dates=None) -> dict:
        return {
            step: run_step(spark, settings, step, WEB_EVENTS, run_id, dates)
            for step in THROUGH_PUBLISH
        }

    return run


@pytest.fixture
def published_view(cassandra_session):
    """``published_view(keyspace, view="page_activity", measure="page_views")`` -> {minute:
    {key: value}} as serving sees it: each day's current version, from Cassandra."""
    from views import view as view_spec

    def read(keyspace: str, view: str = "page_activity", measure: str = "page_views") -> dict:
        (key,) = view_spec(view).keys
        versions = {
            r.day.date(): r.version
            for r in cassandra_session.execute(
                f"SELECT day, version FROM {keyspace}.batch_days WHERE view_name = %s", (view,)
            )
        }
        got: dict = {}
        for row in cassandra_session.execute(
            f"SELECT {key}, day, version, window_start, {measure} FROM {keyspace}.batch_{view}"
        ):
            if versions.get(row.day.date()) == row.version:
                minute = row.window_start.strftime("%Y-%m-%dT%H:%M:00Z")
                got.setdefault(minute, {})[getattr(row, key)] = getattr(row, measure)
        return got

    return read


@pytest.fixture
def gold_page_views(spark):
    """``gold_page_views(settings)`` -> {minute: {path: page views}} from the gold table."""
    from batch_layer.gold import gold_path
    from views import view

    def read(settings: Settings) -> dict:
        pages = spark.read.format("delta").load(gold_path(settings, view("page_activity")))
        got: dict = {}
        for row in pages.select("window_start", "path", "page_views").collect():
            minute = row.window_start.strftime("%Y-%m-%dT%H:%M:00Z")
            got.setdefault(minute, {})[row.path] = row.page_views
        return got

    return read


@pytest.fixture
def step_server_process(pipeline_settings: Settings, tmp_path):
    """A batch step server with this test's settings on a free port, running."""
    port = free_port()
    batch = pipeline_settings.batch.model_copy(update={"step_server_port": port})
    server = StepServerProcess(
        pipeline_settings.model_copy(update={"batch": batch}), tmp_path / "step-server.log"
    )
    server.start()
    yield server
    server.stop()


@pytest.fixture
def step_server(step_server_process: StepServerProcess) -> Settings:
    """The settings that point at a running step server with this test's settings (what the
    DAGs' tasks submit to)."""
    return step_server_process.settings


RUNNER = Path(__file__).parents[1] / "airflow_runner.py"


@pytest.fixture
def run_dag(step_server: Settings, tmp_path):
    """``run_dag(dag_id, conf=None) -> result``: one ``dag.test()`` run in Airflow's venv, its
    tasks submitted to a step server with this test's settings."""
    settings = step_server
    python = ensure_airflow_venv(
        settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
    )
    env = {
        **os.environ,
        **settings_env(settings),
        **airflow_env(tmp_path / "airflow", settings.airflow.dags_folder, settings.spark.master),
    }

    def run(dag_id: str, conf: dict | None = None) -> dict:
        args = [str(python), str(RUNNER), "test", dag_id]
        if conf is not None:
            args += ["--conf", json.dumps(conf)]
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
        assert lines, f"no result from {dag_id}:\n{proc.stderr[-4000:]}"
        result = json.loads(lines[-1])
        assert result["state"] == "success", f"{result}\n{proc.stderr[-6000:]}"
        return result

    return run
