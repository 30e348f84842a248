"""The pipeline's DAGs run end to end in real Airflow, every task a real step run.

``dag.test()`` runs ``web_events_ingest`` then ``web_events_views`` (as the
silver asset would trigger it) in Airflow's own venv; each task submits its
step to a batch step server (``python -m batch_layer serve``) started with
this test's settings, as the local platform runs them. The DAG files are
also parsed with ``WAP_BATCH__RUNNER=submit``, where each task is a
``spark-submit`` through the Spark provider. The steps' reruns,
backfills and gate failures are tested in-process in ``test_pipeline.py``
(the same code each task submits); the demo runs these DAGs through the
real scheduler.
"""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime

import pytest

from batch_layer.bronze import bronze_path
from batch_layer.publish import boundary_for
from core.settings import PROJECT_ROOT, Settings, settings_env
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from layout import read_boundaries
from pipelines import DERIVED, PIPELINES
from platformctl.airflow_venv import airflow_env, ensure_airflow_venv
from tests.support.web import WEB_EVENTS

# Seven steps and a step server's start on two cores: minutes, not seconds.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

INGEST = ("bronze", "silver", "check_silver")
VIEWS = ("gold", "check_gold", "publish", "reconcile")


def test_pipeline_dags_run_end_to_end(spark, step_server, run_dag, gold_page_views):
    settings = step_server
    events = generate(
        SimulatorConfig(
            seed=5,
            events=800,
            rate=0.02,  # about eleven hours of traffic, across a day boundary
            start=datetime(2024, 5, 6, 17, tzinfo=UTC),
            duplicate_rate=0.05,
            late_rate=0.1,
            late_by_s=3600,
            out_of_order_rate=0.1,
            invalid_rate=0.02,
        )
    )
    truth = build_truth(events)
    produce_direct(events, settings)
    started = datetime.now(UTC)

    ingest = run_dag("web_events_ingest")
    assert ingest["tasks"] == dict.fromkeys(INGEST, "success")
    views = run_dag("web_events_views")
    assert views["tasks"] == dict.fromkeys(VIEWS, "success")

    # Gold is the ground truth for every (closed) window, late events in their true minute.
    assert gold_page_views(settings) == truth.page_views
    boundaries = read_boundaries(settings.cassandra, WEB_EVENTS.views)
    assert set(boundaries) == set(WEB_EVENTS.views)
    floor = boundary_for(started, settings.batch.lateness_s, settings.batch.period)
    assert all(b.at >= floor for b in boundaries.values())
    bronze = spark.read.format("delta").load(bronze_path(settings, WEB_EVENTS))
    bronze_rows = bronze.count()
    assert bronze_rows == bronze.select("partition", "offset").distinct().count() > 0


_PARSE_DAGS = """
import json, sys
from pathlib import Path
from airflow.configuration import conf
from airflow.dag_processing.dagbag import BundleDagBag
from airflow.sdk._shared.secrets_masker import redact

folder = Path(conf.get("core", "dags_folder"))
bag = BundleDagBag(dag_folder=folder, bundle_path=folder, safe_mode=False)
tasks = [(d.dag_id, t) for d in bag.dags.values() for t in d.tasks]
pools = {f"{dag_id}.{t.task_id}": [t.pool, t.pool_slots] for dag_id, t in tasks}
upstream = {f"{dag_id}.{t.task_id}": sorted(t.upstream_task_ids) for dag_id, t in tasks}
spark = sorted(m for m in sys.modules if m.split(".")[0] in {"pyspark", "py4j", "delta", "views"})
errors = {k: str(v) for k, v in bag.import_errors.items()}
operators = {f"{dag_id}.{t.task_id}": [type(t).__name__,
                                       getattr(t, "server", getattr(t, "application_id", None))]
             for dag_id, t in tasks}
timeouts = {f"{dag_id}.{t.task_id}": t.execution_timeout and t.execution_timeout.total_seconds()
            for dag_id, t in tasks}
outlets = {f"{dag_id}.{t.task_id}": sorted(a.name for a in t.outlets) for dag_id, t in tasks}
condition = lambda d: getattr(d.timetable, "asset_condition", None)
names = lambda c: [n for o in c.objects for n in names(o)] if hasattr(c, "objects") else [c.name]
schedules = {d.dag_id: sorted(names(condition(d)))
             for d in bag.dags.values() if condition(d) is not None}


def args_of(t):
    if hasattr(t, "application_args"):
        return t.application_args
    return t.job_driver["sparkSubmit"]["entryPointArguments"]  # EMR Serverless
# The forget DAGs' tasks rendered as a run with params {"user": ...} renders them.
context = {"params": {"user": "user-000042", "scope": "pipeline"}, "run_id": "manual__forget-1"}
forget = {
    d.dag_id: {
        "params": {k: d.params.get_param(k).schema for k in d.params},
        "tasks": {
            t.task_id: {
                "args": t.render_template(args_of(t), context, d.get_template_env()),
                "upstream": sorted(t.upstream_task_ids),
            }
            for t in d.tasks
        },
        # What Airflow's task log and rendered fields show once rendered: masked.
        "logged": redact(" ".join(d.get_task("forget").render_template(
            args_of(d.get_task("forget")), context, d.get_template_env()))),
    }
    for d in bag.dags.values()
    if d.dag_id.endswith("_forget")
}
print(json.dumps({"errors": errors, "pools": pools, "upstream": upstream,
                  "spark_modules": spark, "forget": forget, "operators": operators,
                  "timeouts": timeouts, "outlets": outlets, "schedules": schedules}))
"""


EMR = {
    "emr_application_id": "00fabc123def4567",
    "emr_job_role_arn": "arn:aws:iam::123456789012:role/wap-prod-spark-job",
    "artifacts_uri": "s3://wap-prod-lake/artifacts/0.1.0",
}


@pytest.fixture(scope="module", params=["server", "submit", "emr_serverless"])
def parsed_dags(request, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The DAG folder parsed in Airflow's venv as the DAG processor parses it, with the tasks
    run by the step server, by ``spark-submit`` and as EMR Serverless job runs
    (``WAP_BATCH__RUNNER``)."""
    python = ensure_airflow_venv(
        settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
    )
    home = tmp_path_factory.mktemp("airflow")
    batch = settings.batch.model_copy(
        update={"runner": request.param} | (EMR if request.param == "emr_serverless" else {})
    )
    env = {
        **os.environ,
        **settings_env(settings.model_copy(update={"batch": batch})),
        **airflow_env(home, settings.airflow.dags_folder),
    }
    proc = subprocess.run(
        [str(python), "-c", _PARSE_DAGS], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stderr[-4000:]
    loaded = json.loads(lines[-1])
    assert loaded["errors"] == {}
    return loaded | {"runner": request.param, "batch": batch}


def test_every_task_runs_its_step_where_the_settings_say(parsed_dags: dict):
    """``server``: every task submits to the step server of the settings; ``submit``: every
    task is a ``spark-submit``; the same tasks either way."""
    names = tuple(f"{spec.name}_" for spec in PIPELINES)
    operators = {k: v for k, v in parsed_dags["operators"].items() if k.startswith(names)}
    assert len(operators) == len(PIPELINES) * (3 + 4 + 7 + 3 + 5)
    batch = parsed_dags["batch"]
    if parsed_dags["runner"] == "server":
        url = f"http://{batch.step_server_host}:{batch.step_server_port}"
        assert set(map(tuple, operators.values())) == {("BatchStepOperator", url)}
    elif parsed_dags["runner"] == "emr_serverless":
        app = EMR["emr_application_id"]
        assert set(map(tuple, operators.values())) == {("EmrServerlessStartJobOperator", app)}
    else:
        assert {name for name, _ in operators.values()} == {"SparkSubmitOperator"}


def test_every_task_of_a_pipeline_runs_in_its_one_pool(parsed_dags: dict):
    """The ingest, views, backfill, maintenance and forget DAGs of a pipeline share one pool, so
    their steps (over one ledger and one set of tables) never run at the same time."""
    for spec in PIPELINES:
        tasks = {k: v for k, v in parsed_dags["pools"].items() if k.startswith(f"{spec.name}_")}
        assert len(tasks) == 3 + 4 + 7 + 3 + 5
        assert set(map(tuple, tasks.values())) == {(spec.pool, 1)}


def test_every_dag_that_publishes_for_the_schedule_reconciles_after_publish(parsed_dags: dict):
    """``P_views`` and ``P_backfill`` end with ``publish`` -> ``reconcile``; ``P_forget`` does
    not reconcile (the speed rows keep a forgotten user's events until their TTL)."""
    upstream = parsed_dags["upstream"]
    for spec in PIPELINES:
        for dag in (f"{spec.name}_views", f"{spec.name}_backfill"):
            assert upstream[f"{dag}.reconcile"] == ["publish"]
            assert not [t for t, before in upstream.items() if "reconcile" in before]
        assert f"{spec.name}_forget.reconcile" not in upstream


def test_a_derived_pipeline_builds_when_one_of_its_inputs_publishes(parsed_dags: dict):
    """``D_build`` is scheduled on its inputs' assets (a pipeline's silver, a derived
    pipeline's table), not on a clock; its one task runs ``derive`` in the pipeline's pool,
    never retried (it decides), and announces ``D.table``; ``D_backfill`` runs it on dates,
    ``D_maintenance`` compacts and vacuums."""
    assert DERIVED, "no derived pipeline declared"
    for spec in DERIVED:
        inputs = [
            f"{n}.table" if n in {d.name for d in DERIVED} else f"{n}.silver"
            for n in spec.input_names
        ]
        assert parsed_dags["schedules"][f"{spec.name}_build"] == sorted(inputs)
        build, backfill = f"{spec.name}_build.derive", f"{spec.name}_backfill.derive"
        assert parsed_dags["outlets"][build] == [f"{spec.name}.table"]
        assert parsed_dags["pools"][build] == parsed_dags["pools"][backfill] == [spec.pool, 1]
        assert parsed_dags["upstream"][build] == []
        # Daily: its table and ledger compacted, then vacuumed (a forget's replaced files go).
        assert parsed_dags["upstream"][f"{spec.name}_maintenance.vacuum"] == ["optimize"]
    for dag in (f"{spec.name}_views" for spec in PIPELINES):
        assert parsed_dags["schedules"][dag] == [dag.replace("_views", ".silver")]


def test_parsing_the_dags_imports_no_spark_code(parsed_dags: dict):
    """Airflow's venv holds pyspark-client, not the jobs' pyspark: the DAG files, the
    factory and the pipeline specs must not import Spark, nor the views that do."""
    assert parsed_dags["pools"], "no pipeline DAG was parsed"
    assert parsed_dags["spark_modules"] == []


def test_the_forget_dag_erases_then_republishes_through_both_gates(parsed_dags: dict):
    """``P_forget`` renders the user and scope params into the forget step's arguments (the
    scope ``everywhere`` unless a run says ``pipeline``); the silver gate, gold, the gold gate
    and publish follow it in that order."""
    for spec in PIPELINES:
        dag = parsed_dags["forget"][f"{spec.name}_forget"]
        assert dag["params"]["user"]["type"] == "string"
        assert dag["params"]["user"]["minLength"] == 1
        assert dag["params"]["scope"]["enum"] == ["everywhere", "pipeline"]
        tasks = dag["tasks"]
        steps = ["forget", "check_silver", "gold", "check_gold", "publish"]
        assert sorted(tasks) == sorted(steps)
        for before, step in zip(["", *steps], steps, strict=False):
            assert tasks[step]["upstream"] == ([before] if before else [])
            run = ["--pipeline", spec.name, "--run-id", "manual__forget-1"]
            extra = ["--user", "user-000042", "--scope", "pipeline"] if step == "forget" else []
            assert tasks[step]["args"] == [step, *run, *extra]


def test_every_task_has_the_step_timeout_of_the_settings(parsed_dags: dict):
    """A hung step fails its task after ``batch.step_timeout_s`` (then its retries), instead of
    holding the pipeline's one-slot pool for good."""
    names = tuple(f"{spec.name}_" for spec in PIPELINES)
    timeouts = {k: v for k, v in parsed_dags["timeouts"].items() if k.startswith(names)}
    assert timeouts and set(timeouts.values()) == {parsed_dags["batch"].step_timeout_s}


def test_the_forget_dag_masks_the_user_in_task_logs_and_rendered_arguments(parsed_dags: dict):
    for spec in PIPELINES:
        logged = parsed_dags["forget"][f"{spec.name}_forget"]["logged"]
        assert "user-000042" not in logged and "--user ***" in logged
