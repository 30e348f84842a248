"""The DAG factory: every batch pipeline spec becomes its Airflow DAGs.

A helper of ``dags/pipeline_dags.py``, not a DAG file (``.airflowignore`` keeps
the DAG processor from parsing it on its own). It lives with the DAGs, in
Airflow's venv, so that no Airflow import sits in the Spark packages; it
imports nothing that imports Spark either.

For a :class:`pipelines.PipelineSpec` named ``P``:

- ``P_ingest`` (the pipeline's schedule, hourly by default): bronze -> silver
  -> check_silver; a passed check updates the ``P.silver`` asset;
- ``P_views`` (scheduled on ``P.silver``, data-aware): gold -> check_gold ->
  publish -> reconcile; updates ``P.gold`` and ``P.boundary``; reconcile
  compares the published batch rows with the speed rows still held and fails
  (exit code 4, a report in the task log) when they drift;
- ``P_backfill`` (manual, params ``start``/``end``): the whole chain with
  silver reprocessing those days from bronze, then reconcile; rerunning it is
  safe;
- ``P_maintenance`` (daily by default): OPTIMIZE, VACUUM, dropping superseded batch
  versions from Cassandra;
- ``P_forget`` (manual; param ``user``): forget a user (``batch_layer/forget.py``)
  -> check_silver -> gold -> check_gold -> publish: the days that held the
  user's events are recomputed and republished through both gates. No
  reconcile: the speed rows keep the user's events until their TTL, so those
  days would differ (reconcile leaves the days a forget republished out).

For a derived pipeline ``D`` (:class:`pipelines.DerivedSpec`, a table built from other
pipelines' data):

- ``D_build`` (data-aware: scheduled on its inputs' assets, ``P.silver`` of an
  input pipeline, ``E.table`` of a derived input; it runs when any of them is
  updated, not on a clock): ``derive``, which rebuilds the days its inputs
  changed and gates them before it writes; a passed run updates ``D.table``;
- ``D_backfill`` (manual, params ``start``/``end``): ``derive`` of those days;
- ``D_maintenance`` (daily by default): OPTIMIZE and VACUUM of its table and ledger
  (the files a rebuild after a forget replaced are deleted here).

Every task of a pipeline's DAGs runs in the pipeline's Airflow pool
(``spec.pool``, one slot, created by ``platformctl up airflow``): the DAGs
share the pipeline's tables and ledger, so their steps run one at a time.

Every task runs ``batch_layer/__main__.py STEP`` outside Airflow: no Spark
driver runs inside it. How is ``WAP_BATCH__RUNNER``:

- ``server`` (the local default): a :class:`batch_step.BatchStepOperator`
  sends the step to the batch step server (``python -m batch_layer serve``,
  the ``batch`` service of ``platformctl``), one long-lived Spark
  application, so a task does not pay a JVM and SparkSession start;
- ``submit``: a ``spark-submit`` through the Spark provider, against the
  ``spark_platform`` connection (``AIRFLOW_CONN_SPARK_PLATFORM``, set from
  ``WAP_SPARK__MASTER``), as on a cluster;
- ``emr_serverless`` (production on AWS): an EMR Serverless job run through
  the Amazon provider, of the artifact ``python -m platformctl package``
  builds (:mod:`batch_layer.emr`), waiting for its end like the others.

Same task ids, pools, assets and retries either way. The ``WAP_*`` settings
reach the job through the server's or the worker's environment, never
through the DAG (no secrets in task parameters). A failed quality gate
exits with code 3, fails its task and so stops the chain before publish:
the boundary does not move. A reconcile that finds drift exits with code 4
after publish: the boundary has moved (the batch rows are right), the alert
is about the speed rows.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, BaseOperator, Param, chain
from batch_step import BatchStepOperator

from batch_layer.steps import (
    ALL,
    DERIVED,
    DERIVED_MAINTENANCE,
    FORGET,
    INGEST,
    MAINTENANCE,
    STEPS,
    VIEWS,
)
from core.settings import PROJECT_ROOT, Settings
from core.spark import local_spark_jars, spark_conf
from pipelines import DerivedSpec, PipelineSpec, declared_pipeline

__all__ = ["SPARK_CONN_ID", "derived_dags", "personal", "pipeline_dags"]

SPARK_CONN_ID = "spark_platform"
APPLICATION = str(PROJECT_ROOT / "batch_layer" / "__main__.py")
START = datetime(2024, 1, 1, tzinfo=UTC)


def personal(value: str) -> str:
    """Jinja filter ``| personal``: ``value`` names a person, so Airflow masks it (``***``) in
    the task's log and in its rendered arguments the UI shows."""
    from airflow.sdk.log import mask_secret

    mask_secret(value)
    return value


def _submit_kwargs(settings: Settings, spec: PipelineSpec | DerivedSpec) -> dict:
    """Jars, conf and environment of every spark-submit of this pipeline."""
    jars = settings.spark.jars
    if jars is None:
        try:
            jars = local_spark_jars(settings.local.state_dir)
        except FileNotFoundError:
            jars = ()  # parsing must not fail before `make install`; the task would
    conf = spark_conf(settings.spark, app_name=f"batch-{spec.name}", jars=())
    for launcher_only in ("spark.master", "spark.jars", "spark.app.name"):
        conf.pop(launcher_only, None)
    python = str(Path(settings.batch.spark_submit).parent / "python")
    env = {
        "PATH": f"{Path(settings.batch.spark_submit).parent}:/usr/local/bin:/usr/bin:/bin",
        "PYSPARK_PYTHON": python,
        "PYSPARK_DRIVER_PYTHON": python,
    }
    if settings.spark.master.startswith("local"):
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return {"conn_id": SPARK_CONN_ID, "jars": ",".join(jars), "conf": conf, "env_vars": env}


def _step(
    settings: Settings,
    spec: PipelineSpec | DerivedSpec,
    step: str,
    *,
    extra_args: tuple[str, ...] = (),
    outlets: list[Asset] | None = None,
    retries: int = 2,
) -> BaseOperator:
    """The task of one step: on the step server, or a ``spark-submit`` (``batch.runner``)."""
    args = [step, "--pipeline", spec.name, "--run-id", "{{ run_id }}", *extra_args]
    common = {
        "task_id": step,
        "pool": spec.pool,
        "pool_slots": 1,
        "outlets": outlets or [],
        "retries": retries,
        "retry_delay": timedelta(minutes=1),
        "execution_timeout": timedelta(seconds=settings.batch.step_timeout_s),
    }
    if settings.batch.runner == "server":
        server = f"http://{settings.batch.step_server_host}:{settings.batch.step_server_port}"
        token = settings.batch.step_server_token
        return BatchStepOperator(server=server, application_args=args, token=token, **common)
    if settings.batch.runner == "emr_serverless":
        # Imported here: each runtime needs only its own provider (MWAA ships Amazon's).
        from airflow.providers.amazon.aws.operators.emr import EmrServerlessStartJobOperator

        from batch_layer.emr import job_driver, monitoring

        return EmrServerlessStartJobOperator(
            application_id=settings.batch.emr_application_id,
            execution_role_arn=settings.batch.emr_job_role_arn,
            job_driver=job_driver(settings, args),
            configuration_overrides=monitoring(settings),
            name=f"{spec.name}-{step}-{{{{ run_id }}}}",
            aws_conn_id=settings.batch.emr_aws_conn_id,
            wait_for_completion=True,
            **common,
        )
    from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

    return SparkSubmitOperator(
        application=APPLICATION,
        application_args=args,
        name=f"{spec.name}-{step}",
        **common,
        **_submit_kwargs(settings, spec),
    )


FORGET_ARGS = ("--user", "{{ params.user | personal }}", "--scope", "{{ params.scope }}")
"""The forget DAG's person and scope, from its params (the person masked in its logs)."""


def _chain(
    settings: Settings,
    spec: PipelineSpec | DerivedSpec,
    steps: tuple[str, ...],
    assets: dict[str, Asset],
    *,
    extra: dict[str, tuple[str, ...]] | None = None,
    quiet: tuple[str, ...] = (),
) -> None:
    """The tasks of ``steps`` one after the other, as the steps' table describes them: a step
    that decides (a gate, the reconciliation) is never retried; one that publishes an asset
    announces it, unless the DAG keeps it ``quiet``."""
    tasks = []
    for name in steps:
        step = STEPS[name]
        announced = step.outlet is not None and step.outlet not in quiet
        tasks.append(
            _step(
                settings,
                spec,
                name,
                extra_args=(extra or {}).get(name, ()),
                outlets=[assets[step.outlet]] if announced else [],  # type: ignore[index]
                retries=0 if step.decides else 2,
            )
        )
    chain(*tasks)


def pipeline_dags(spec: PipelineSpec, settings: Settings) -> dict[str, DAG]:
    """The DAGs of one pipeline, by dag_id."""
    assets = {name: _asset(spec.name, name) for name in ("silver", "gold", "boundary")}
    common = {
        "start_date": START,
        "catchup": False,
        "max_active_runs": 1,
        "default_args": {"owner": spec.owner},
        "tags": ["batch", spec.name],
    }
    dags: dict[str, DAG] = {}

    with DAG(
        f"{spec.name}_ingest",
        schedule=spec.schedule_of(settings),
        description=f"{spec.name}: Kafka -> bronze -> silver, gated",
        **common,
    ) as ingest:
        _chain(settings, spec, INGEST, assets)
    dags[ingest.dag_id] = ingest

    with DAG(
        f"{spec.name}_views",
        schedule=[assets["silver"]],
        description=f"{spec.name}: silver -> gold -> published batch views and boundary, "
        "reconciled with the speed views",
        **common,
    ) as views:
        _chain(settings, spec, VIEWS, assets)
    dags[views.dag_id] = views

    with _backfill(spec, "reprocess a date range from bronze (idempotent)", common) as backfill:
        _chain(settings, spec, ALL, assets, extra={"silver": DATES})
    dags[backfill.dag_id] = backfill

    what = "OPTIMIZE, VACUUM, drop superseded batch versions"
    with _maintenance(settings, spec, what, common) as maintenance:
        _chain(settings, spec, MAINTENANCE, assets)
    dags[maintenance.dag_id] = maintenance

    with DAG(
        f"{spec.name}_forget",
        schedule=None,
        description=f"{spec.name}: forget a user, then republish the days that held their events",
        user_defined_filters={"personal": personal},
        params={
            "user": Param(
                type="string", minLength=1, description="the userId or anonymousId to forget"
            ),
            "scope": Param(
                "everywhere",
                enum=["everywhere", "pipeline"],
                description="everywhere: the person's new events are dropped by every "
                "pipeline, present and future; pipeline: by this one only",
            ),
        },
        **common,
    ) as forget:
        _chain(
            settings,
            spec,
            FORGET,
            assets,
            extra={
                "forget": (
                    "--user",
                    "{{ params.user | personal }}",
                    "--scope",
                    "{{ params.scope }}",
                )
            },
            # No silver outlet: this DAG runs gold itself; the views DAG would find nothing.
            quiet=("silver",),
        )
    dags[forget.dag_id] = forget
    return dags


DATES = ("--dates", "{{ params.start }}..{{ params.end }}")
"""The days a backfill DAG's run rebuilds, from its params."""


def _backfill(spec: PipelineSpec | DerivedSpec, what: str, common: dict) -> DAG:
    """The manual DAG ``<name>_backfill`` whose params are the first and last day."""
    return DAG(
        f"{spec.name}_backfill",
        schedule=None,
        description=f"{spec.name}: {what}",
        params={
            "start": Param(type="string", format="date", description="first day (UTC)"),
            "end": Param(type="string", format="date", description="last day (UTC), inclusive"),
        },
        **common,
    )


def _maintenance(
    settings: Settings, spec: PipelineSpec | DerivedSpec, what: str, common: dict
) -> DAG:
    """The DAG ``<name>_maintenance``, on the maintenance schedule of the settings."""
    return DAG(
        f"{spec.name}_maintenance",
        schedule=settings.batch.maintenance_schedule,
        description=f"{spec.name}: {what}",
        **common,
    )


def _asset(name: str, kind: str) -> Asset:
    """The asset ``kind`` (``silver``, ``gold``, ``boundary``, ``table``) of pipeline ``name``."""
    return Asset(name=f"{name}.{kind}", uri=f"wap://{name}/{kind}")


def derived_dags(spec: DerivedSpec, settings: Settings) -> dict[str, DAG]:
    """The DAGs of one derived pipeline, by dag_id."""
    inputs = [
        _asset(name, "table" if isinstance(declared_pipeline(name), DerivedSpec) else "silver")
        for name in spec.input_names
    ]
    assets = {"table": _asset(spec.name, "table")}
    common = {
        "start_date": START,
        "catchup": False,
        "max_active_runs": 1,
        "default_args": {"owner": spec.owner},
        "tags": ["batch", "derived", spec.name],
    }
    dags: dict[str, DAG] = {}
    any_input = inputs[0]
    for more in inputs[1:]:
        any_input = any_input | more
    with DAG(
        f"{spec.name}_build",
        schedule=any_input,
        description=f"{spec.name}: the days its inputs ({', '.join(spec.input_names)}) "
        "changed, rebuilt and gated",
        **common,
    ) as build:
        _chain(settings, spec, DERIVED, assets)
    dags[build.dag_id] = build

    with _backfill(spec, "rebuild a date range from its inputs (idempotent)", common) as backfill:
        _chain(settings, spec, DERIVED, assets, extra={"derive": DATES})
    dags[backfill.dag_id] = backfill

    what = "OPTIMIZE and VACUUM its table and ledger"
    with _maintenance(settings, spec, what, common) as maintenance:
        _chain(settings, spec, DERIVED_MAINTENANCE, assets)
    dags[maintenance.dag_id] = maintenance
    return dags
