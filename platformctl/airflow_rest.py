"""The running local Airflow, through its REST API: health, parsed DAGs and DAG runs.

``status`` reads :func:`health` and :func:`dag_summary`; the demo and the
tests run DAGs through the real scheduler with :func:`trigger_and_wait` and
follow the run an asset update schedules with :func:`wait_for_next_run`::

    started = datetime.now(UTC)
    trigger_and_wait(settings, "web_events_ingest")  # -> "success"
    wait_for_next_run(settings, "web_events_views", after=started)  # -> "success"

Each poll is a small HTTP request to the api-server: no Airflow import here
and no ``airflow`` CLI process per poll. Every client first asks ``/auth/token``
for a token of the ``admin`` user with ``settings.airflow.admin_password``
(see :mod:`platformctl.services.airflow`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from core.log import get_logger, log_event
from core.settings import Settings
from platformctl.services.airflow import USER, api_url

__all__ = [
    "AirflowUnavailable",
    "component_health",
    "dag_summary",
    "ensure_pool",
    "health",
    "progress_line",
    "runs_since",
    "task_instances",
    "trigger",
    "trigger_and_wait",
    "unpause",
    "wait_for_dags",
    "wait_for_next_run",
    "wait_for_run",
    "wait_for_run_fed_by",
]

Progress = Callable[[str], None]
"""Receives one line each time a run's state or one of its tasks' states changes."""

_POLL_S = 2.0
_TIMEOUT_S = 30.0
_READ_ATTEMPTS = 3
_FINISHED = ("success", "failed")
_log = get_logger(__name__)


class AirflowUnavailable(RuntimeError):
    """The api-server did not answer (not started, or still starting)."""


def _token(settings: Settings) -> str:
    """A JWT for the ``admin`` user, with ``settings.airflow.admin_password``."""
    url = f"{api_url(settings.airflow)}/auth/token"
    password = settings.airflow.admin_password.get_secret_value()
    try:
        answer = httpx.post(url, json={"username": USER, "password": password}, timeout=10)
    except httpx.TransportError as exc:
        raise AirflowUnavailable(
            f"Airflow's api-server at {url} did not answer ({exc}). "
            "Start it with `python -m platformctl up airflow`."
        ) from exc
    if answer.status_code in (400, 401, 403):
        raise RuntimeError(
            f"Airflow refused the {USER} password ({answer.status_code}): the api-server was "
            "started with another WAP_AIRFLOW__ADMIN_PASSWORD; use the same one, or restart it "
            "(`python -m platformctl down airflow && python -m platformctl up airflow`)."
        )
    answer.raise_for_status()
    return answer.json()["access_token"]


def _client(settings: Settings) -> httpx.Client:
    headers = {"Authorization": f"Bearer {_token(settings)}"}
    return httpx.Client(base_url=api_url(settings.airflow), headers=headers, timeout=_TIMEOUT_S)


def _call(
    client: httpx.Client, method: str, path: str, *, missing_ok: bool = False, **kwargs: Any
) -> httpx.Response:
    """One request; a helpful error when the server is down or refuses it.

    A read the api-server is too busy to answer in time (its workers share the machine with
    the tasks it schedules) is asked again, up to ``_READ_ATTEMPTS`` times; a write is not,
    since it may have been done.
    """
    attempts = _READ_ATTEMPTS if method == "GET" else 1
    for attempt in range(1, attempts + 1):
        try:
            answer = client.request(method, path, **kwargs)
            break
        except httpx.TimeoutException as exc:
            if attempt == attempts:
                raise AirflowUnavailable(
                    f"Airflow's api-server at {client.base_url} did not answer {method} {path} "
                    f"within {_TIMEOUT_S:.0f}s, {attempts} times ({exc})."
                ) from exc
            log_event(_log, "airflow.read.timed_out", path=path, attempt=attempt)
        except httpx.TransportError as exc:
            raise AirflowUnavailable(
                f"Airflow's api-server at {client.base_url} did not answer {method} {path} "
                f"({exc}). Start it with `python -m platformctl up airflow`."
            ) from exc
    if answer.is_error and not (missing_ok and answer.status_code == 404):
        raise RuntimeError(f"{method} {path} answered {answer.status_code}: {answer.text[:500]}")
    return answer


def _dag(dag_id: str) -> str:
    return f"/api/v2/dags/{quote(dag_id, safe='')}"


def _run(dag_id: str, run_id: str) -> str:
    return f"{_dag(dag_id)}/dagRuns/{quote(run_id, safe='')}"


def ensure_pool(settings: Settings, name: str, slots: int, description: str) -> bool:
    """Create the pool ``name`` with ``slots`` slots, or set its slots; True when changed.

    Tasks of a pool that does not exist are never scheduled, so the platform
    creates every pool its DAGs name (``platformctl up airflow``).
    """
    path = f"/api/v2/pools/{quote(name, safe='')}"
    with _client(settings) as client:
        found = _call(client, "GET", path, missing_ok=True)
        if found.status_code == 404:
            body = {"name": name, "slots": slots, "description": description}
            _call(client, "POST", "/api/v2/pools", json=body)
            return True
        if found.json().get("slots") != slots:
            _call(client, "PATCH", path, params={"update_mask": "slots"}, json={"slots": slots})
            return True
    return False


def health(settings: Settings, timeout_s: float = 5.0) -> dict[str, Any]:
    """The api-server's ``/api/v2/monitor/health`` answer (no login needed)."""
    url = f"{api_url(settings.airflow)}/api/v2/monitor/health"
    try:
        answer = httpx.get(url, timeout=timeout_s)
    except httpx.TransportError as exc:
        raise AirflowUnavailable(f"{url} did not answer: {exc}") from exc
    answer.raise_for_status()
    return answer.json()


def component_health(
    answer: Mapping[str, Any], component: str, started_at: datetime | None = None
) -> tuple[bool, str]:
    """Whether one component is healthy according to a health answer, and why.

    The api-server is healthy when it answers and the metadatabase is; the
    scheduler and the dag-processor when their latest heartbeat is recent
    (Airflow's threshold) and, given ``started_at``, newer than the start of
    our process (not the heartbeat of a previous, killed one).
    """
    database = (answer.get("metadatabase") or {}).get("status")
    if component == "api-server":
        return database == "healthy", f"metadatabase {database}"
    key = component.replace("-", "_")
    part = answer.get(key) or {}
    beat = part.get(f"latest_{key}_heartbeat")
    if part.get("status") != "healthy" or beat is None:
        return False, f"{component} {part.get('status') or 'not seen yet'}"
    beat_at = datetime.fromisoformat(beat)
    if started_at is not None and beat_at < started_at:
        return False, f"no {component} heartbeat since this process started"
    return True, f"heartbeat {(datetime.now(UTC) - beat_at).total_seconds():.0f}s ago"


def dag_summary(settings: Settings) -> tuple[int, dict[str, str]]:
    """The number of DAGs parsed and the import errors (file -> last line of the trace)."""
    with _client(settings) as client:
        dags = _call(client, "GET", "/api/v2/dags", params={"limit": 1}).json()
        errors = _call(client, "GET", "/api/v2/importErrors", params={"limit": 100}).json()
    return dags["total_entries"], {
        error["filename"]: (error["stack_trace"].strip().splitlines() or [""])[-1]
        for error in errors["import_errors"]
    }


def wait_for_dags(settings: Settings, dag_ids: Iterable[str], *, timeout_s: float = 180.0) -> None:
    """Block until the dag-processor has parsed every DAG of ``dag_ids``.

    Raises :class:`TimeoutError` naming the missing DAGs and the import errors.
    """
    missing = list(dag_ids)
    deadline = time.monotonic() + timeout_s
    with _client(settings) as client:
        while True:
            missing = [
                dag_id
                for dag_id in missing
                if _call(client, "GET", _dag(dag_id), missing_ok=True).status_code == 404
            ]
            if not missing:
                return
            if time.monotonic() > deadline:
                errors = dag_summary(settings)[1]
                raise TimeoutError(
                    f"DAG(s) {missing} not parsed after {timeout_s:.0f}s from "
                    f"{settings.airflow.dags_folder}; import errors: {errors or 'none'}. "
                    "See `python -m platformctl logs airflow-dag-processor`."
                )
            time.sleep(_POLL_S)


def unpause(settings: Settings, dag_id: str) -> None:
    """Let the scheduler run ``dag_id`` (a paused DAG gets no scheduled or asset runs)."""
    with _client(settings) as client:
        _call(client, "PATCH", _dag(dag_id), json={"is_paused": False})


def trigger(settings: Settings, dag_id: str, conf: Mapping[str, Any] | None = None) -> str:
    """Create a manual run of ``dag_id`` for the scheduler to pick up; return its run id."""
    with _client(settings) as client:
        body = {"logical_date": None, "conf": dict(conf or {})}
        return _call(client, "POST", f"{_dag(dag_id)}/dagRuns", json=body).json()["dag_run_id"]


def task_instances(settings: Settings, dag_id: str, run_id: str) -> list[dict[str, Any]]:
    """The task instances of one run (states, queued, start and end times, durations)."""
    with _client(settings) as client:
        return _call(client, "GET", f"{_run(dag_id, run_id)}/taskInstances").json()[
            "task_instances"
        ]


def runs_since(settings: Settings, dag_id: str, after: datetime) -> list[dict[str, Any]]:
    """The runs of ``dag_id`` due at or after ``after``, oldest first."""
    params = {"run_after_gte": after.isoformat(), "order_by": "run_after", "limit": 50}
    with _client(settings) as client:
        return _call(client, "GET", f"{_dag(dag_id)}/dagRuns", params=params).json()["dag_runs"]


def progress_line(run: Mapping[str, Any], task_instances: Iterable[Mapping[str, Any]]) -> str:
    """``dag run_id: state (task state, ...)``, tasks in the order they started."""
    tasks = sorted(task_instances, key=lambda ti: (ti.get("start_date") or "~", ti["task_id"]))
    states = ", ".join(f"{ti['task_id']} {ti.get('state') or 'waiting'}" for ti in tasks)
    return f"{run['dag_id']} {run['dag_run_id']}: {run['state']} ({states})"


def _report(line: str) -> None:
    log_event(_log, "airflow.run.progress", run=line)


def wait_for_run(
    settings: Settings,
    dag_id: str,
    run_id: str,
    *,
    timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> str:
    """Poll one run until it finishes; report each change; return ``success`` or ``failed``."""
    report = progress or _report
    deadline, last = time.monotonic() + timeout_s, None
    with _client(settings) as client:
        while True:
            run = _call(client, "GET", _run(dag_id, run_id)).json()
            tasks = _call(client, "GET", f"{_run(dag_id, run_id)}/taskInstances").json()
            line = progress_line(run, tasks["task_instances"])
            if line != last:
                report(line)
                last = line
            if run["state"] in _FINISHED:
                return run["state"]
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{line}, still not finished after {timeout_s:.0f}s. Task logs are under "
                    f"{settings.airflow.home / 'logs'}; the UI at {api_url(settings.airflow)}."
                )
            time.sleep(_POLL_S)


def wait_for_next_run(
    settings: Settings,
    dag_id: str,
    *,
    after: datetime,
    timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> str:
    """Wait for the first run of ``dag_id`` due at or after ``after`` and for its end.

    For a DAG scheduled by others (an asset update, a schedule): take ``after``
    before triggering the upstream DAG. Returns ``success`` or ``failed``.
    """
    if after.tzinfo is None:
        raise ValueError(f"after={after!r} must be timezone-aware, e.g. datetime.now(UTC).")
    deadline = time.monotonic() + timeout_s
    wait_for_dags(settings, [dag_id], timeout_s=timeout_s)
    with _client(settings) as client:
        if _call(client, "GET", _dag(dag_id)).json()["is_paused"]:
            raise RuntimeError(
                f"{dag_id} is paused, so the scheduler queues no run for it. Unpause it "
                "(platformctl.airflow_rest.unpause) before triggering the DAG upstream of it."
            )
        params = {"run_after_gte": after.isoformat(), "order_by": "run_after", "limit": 1}
        while True:
            runs = _call(client, "GET", f"{_dag(dag_id)}/dagRuns", params=params).json()
            if runs["dag_runs"]:
                run_id = runs["dag_runs"][0]["dag_run_id"]
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"No run of {dag_id} since {after.isoformat()} after {timeout_s:.0f}s: "
                    "did the upstream DAG update the asset it is scheduled on?"
                )
            time.sleep(_POLL_S)
    remaining = max(deadline - time.monotonic(), _POLL_S)
    return wait_for_run(settings, dag_id, run_id, timeout_s=remaining, progress=progress)


def trigger_and_wait(
    settings: Settings,
    dag_id: str,
    conf: Mapping[str, Any] | None = None,
    *,
    timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> str:
    """Run ``dag_id`` through the scheduler and wait for it: ``success`` or ``failed``.

    Waits until the DAG is parsed, unpauses it, triggers a manual run with
    ``conf`` and reports progress (to ``progress``, else to the log) until the
    run finishes. Raises :class:`TimeoutError` after ``timeout_s`` in all.
    """
    if timeout_s <= 0:
        raise ValueError(f"timeout_s={timeout_s} must be positive.")
    deadline = time.monotonic() + timeout_s
    wait_for_dags(settings, [dag_id], timeout_s=timeout_s)
    unpause(settings, dag_id)
    run_id = trigger(settings, dag_id, conf)
    remaining = max(deadline - time.monotonic(), _POLL_S)
    return wait_for_run(settings, dag_id, run_id, timeout_s=remaining, progress=progress)


def wait_for_run_fed_by(
    settings: Settings,
    dag_id: str,
    source_dag_id: str,
    source_run_id: str,
    *,
    after: datetime,
    timeout_s: float = 1800.0,
    progress: Progress | None = None,
) -> str:
    """Wait for the run of ``dag_id`` that consumed the asset events of one upstream run.

    Data-aware scheduling: when ``source_dag_id``'s run ``source_run_id``
    updates an asset ``dag_id`` is scheduled on, the scheduler queues a run of
    ``dag_id`` whose upstream asset events name that source run. Runs of
    ``dag_id`` queued since ``after`` are searched for it (other upstream
    runs, e.g. scheduled ones, may have fed earlier runs); then that run is
    followed to its end. Returns ``success`` or ``failed``.
    """
    deadline = time.monotonic() + timeout_s
    params = {"run_after_gte": after.isoformat(), "order_by": "run_after", "limit": 50}
    with _client(settings) as client:
        while True:
            runs = _call(client, "GET", f"{_dag(dag_id)}/dagRuns", params=params).json()
            fed = None
            for run in runs["dag_runs"]:
                try:
                    events = _call(
                        client, "GET", f"{_run(dag_id, run['dag_run_id'])}/upstreamAssetEvents"
                    ).json()["asset_events"]
                except RuntimeError as error:
                    # Airflow answers 500 while a run its asset event created has no start
                    # date yet (its AssetEventResponse requires one); ask at the next poll.
                    log_event(
                        _log,
                        "airflow.asset_events_not_ready",
                        run=run["dag_run_id"],
                        error=str(error)[:200],
                    )
                    continue
                if any(
                    e.get("source_dag_id") == source_dag_id
                    and e.get("source_run_id") == source_run_id
                    for e in events
                ):
                    fed = run["dag_run_id"]
                    break
            if fed is not None:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"No run of {dag_id} consumed the asset events of {source_dag_id} "
                    f"{source_run_id} after {timeout_s:.0f}s."
                )
            time.sleep(_POLL_S)
    remaining = max(deadline - time.monotonic(), _POLL_S)
    return wait_for_run(settings, dag_id, fed, timeout_s=remaining, progress=progress)
