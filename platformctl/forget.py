"""``platformctl forget --user ID``: forget a user across the platform (right to erasure).

One request erases the person from every pipeline whose declaration names the
fields that identify a person (``PipelineSpec.identity``), or from those named
with ``--pipeline``, then rebuilds every derived pipeline that reads one of them
(directly or through another): the days the forgets rewrote are pending for it,
so it builds them again from inputs that no longer hold the person (recomputed,
not erased by id: a derived table's rows may be sums over people, which no
erasure by id can correct). For each, through Airflow when its api-server and
scheduler are up: a run of the pipeline's ``<pipeline>_forget`` DAG (param
``user``), followed to its end;
the report is the last line of its ``forget`` task's log. Otherwise the same
steps run in this process (:data:`batch_layer.steps.FORGET`:
forget, the silver gate, gold, the gold gate, publish) and the report is
printed. What is deleted where, and when it is physically gone:
docs/operations.md, "Forgetting a user".
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import subject_of

__all__ = ["airflow_ready", "forget_user", "reached_by"]

_log = get_logger(__name__)


def airflow_ready(settings: Settings) -> bool:
    """Whether Airflow's api-server answers and its scheduler is alive (a run would start)."""
    from platformctl.airflow_rest import AirflowUnavailable, component_health, health

    try:
        answer = health(settings, timeout_s=3.0)
    except (AirflowUnavailable, OSError, ValueError):
        return False
    return all(component_health(answer, c)[0] for c in ("api-server", "scheduler"))


def forget_user(
    settings: Settings, user: str, pipelines: Sequence[str] = (), *, in_process: bool = False
) -> tuple[dict[str, Any], int]:
    """Forget ``user`` in ``pipelines`` (default: every pipeline with identity fields);
    (the report, one entry per pipeline, and the exit code: 0 when every one succeeded).

    Without ``pipelines`` the person is suppressed everywhere: every pipeline, present and
    future, drops their new events. Named, only those pipelines do: the others keep them."""
    from pipelines import PIPELINES, pipeline

    specs = [pipeline(name) for name in pipelines] or [s for s in PIPELINES if s.identity]
    if not user.strip():
        raise ValueError("--user must name a person's id (a userId, an anonymousId, a buyer).")
    scope = "pipeline" if pipelines else "everywhere"
    reports, code = {}, 0
    for spec in specs:
        reports[spec.name], failed = _forget_in(settings, spec, user, scope, in_process=in_process)
        code = code or failed
    for derived in reached_by({s.name for s in specs}):
        reports[derived.name], failed = _rebuild(settings, derived, in_process=in_process)
        code = code or failed
    subject = subject_of(user, settings.batch.subject_key)
    report = {"subject": subject, "scope": scope, "pipelines": reports}
    return report, code


def reached_by(forgotten: set[str]) -> list[Any]:
    """The derived pipelines that read, directly or through others, one of ``forgotten``:
    each in an order after its inputs.

    >>> [d.name for d in reached_by({"web_events"})], reached_by({"no_such_pipeline"})
    (['web_sessions', 'order_attribution'], [])
    """
    from pipelines import DERIVED

    touched, reached = set(forgotten), []
    for derived in DERIVED:  # each after its inputs
        if touched & set(derived.input_names):
            reached.append(derived)
            touched.add(derived.name)
    return reached


def _rebuild(settings: Settings, spec: Any, *, in_process: bool) -> tuple[dict[str, Any], int]:
    """A derived pipeline's build once its inputs forgot: the days their forgets rewrote
    are pending for it (a forget's silver run, gated), so it rebuilds them without the
    person."""
    if not in_process and airflow_ready(settings):
        return _via_airflow(settings, f"{spec.name}_build", {}, "derive")
    return _in_process(settings, spec, "", "", steps=("derive",))


def _via_airflow(
    settings: Settings, dag_id: str, params: dict[str, Any], task: str
) -> tuple[dict[str, Any], int]:
    from platformctl.airflow_rest import trigger, unpause, wait_for_dags, wait_for_run

    wait_for_dags(settings, [dag_id])
    unpause(settings, dag_id)
    run_id = trigger(settings, dag_id, params)
    state = wait_for_run(settings, dag_id, run_id)
    log_event(_log, "forget.dag_finished", dag_id=dag_id, run_id=run_id, state=state)
    report = {
        "via": "airflow",
        "dag_id": dag_id,
        "run_id": run_id,
        "state": state,
        "report": f"the last line of the log of task {task!r} of {dag_id} run {run_id}",
    }
    return report, 0 if state == "success" else 1


def _forget_in(
    settings: Settings, spec: Any, user: str, scope: str, *, in_process: bool
) -> tuple[dict[str, Any], int]:
    if not in_process and airflow_ready(settings):
        params = {"user": user, "scope": scope}
        return _via_airflow(settings, f"{spec.name}_forget", params, "forget")
    return _in_process(settings, spec, user, scope)


def _in_process(
    settings: Settings, spec: Any, user: str, scope: str, steps: tuple[str, ...] = ()
) -> tuple[dict[str, Any], int]:
    from batch_layer.runner import run_steps
    from batch_layer.steps import FORGET
    from core.spark import build_spark_session
    from pipelines import validated

    run_id = time.strftime("forget__%Y-%m-%dT%H:%M:%S")
    spark = build_spark_session(settings, app_name=f"forget-{spec.name}")
    try:
        summary, code = run_steps(
            spark, settings, steps or FORGET, validated(spec), run_id, user=user or None,
            scope=scope or "everywhere",
        )  # fmt: skip
    finally:
        spark.stop()
    return {"via": "in-process", **summary}, code
