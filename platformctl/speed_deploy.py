"""The production speed job kept running on EMR Serverless: ``speed-deploy`` and ``speed-status``.

The streaming speed layer runs as one EMR Serverless job run in streaming
mode (:mod:`speed_layer.emr`). EMR Serverless restarts a failed attempt from
the checkpoint by itself (the retry policy); what it does not know is that
the job owns one checkpoint, so two runs of it must never overlap. Hence:

- :func:`deploy` finds the speed job's runs on its application (by name),
  leaves a live one alone, and starts one when none is live, with a start
  token derived from what it saw, so two deploys racing start one run;
- with ``replace`` (a new artifact version) it cancels the live run, waits
  until it has ended, and only then starts the new one, which resumes from the
  same checkpoint;
- a run that ended (FAILED once its retries were spent, CANCELLED, SUCCESS)
  is reported and followed by a new one;
- :func:`status` reports what an operator needs: the run, its state, its
  attempt, when it started.

Both take an ``emr-serverless`` client (boto3's, or one whose requests are
checked in tests) and report as structured log lines and a JSON-ready dict.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.log import get_logger, log_event
from core.settings import Settings
from speed_layer.emr import STREAMING, check, start_job_run_request

__all__ = [
    "ACTIVE",
    "ENDED",
    "DeployError",
    "Run",
    "application",
    "deploy",
    "emr_client",
    "idempotency_token",
    "runs",
    "status",
]

_log = get_logger(__name__)

ACTIVE = ("SUBMITTED", "PENDING", "SCHEDULED", "QUEUED", "RUNNING", "CANCELLING")
"""States of a run that may still read or write the checkpoint."""
ENDED = ("SUCCESS", "FAILED", "CANCELLED")
"""States of a run that is over."""


class DeployError(RuntimeError):
    """The deploy stopped without starting a run, and says why and what to do."""


@dataclass(frozen=True)
class Run:
    """One of the speed job's runs, as ``ListJobRuns`` summarises it."""

    id: str
    state: str
    created_at: datetime
    attempt: int | None = None
    state_details: str | None = None

    def report(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "attempt": self.attempt,
            "created_at": self.created_at.isoformat(),
            "state_details": self.state_details or None,
        }


def emr_client(region: str | None = None):
    """boto3's ``emr-serverless`` client, with the caller's credentials and region. boto3 is
    imported here, not with this module: nothing else of ``platformctl`` needs it."""
    import boto3

    return boto3.client("emr-serverless", region_name=region)


def application(settings: Settings) -> str:
    """The speed job's EMR Serverless application; ValueError when it is not set."""
    application_id = settings.speed_job.emr_application_id
    if not application_id:
        raise ValueError(
            "speed_job.emr_application_id is not set (WAP_SPEED_JOB__EMR_APPLICATION_ID, the "
            "Terraform output of the same name)."
        )
    return application_id


def runs(client, settings: Settings) -> list[Run]:
    """The speed job's streaming runs on its application (named ``speed_job.name``), newest
    first."""
    found = []
    pages = client.get_paginator("list_job_runs").paginate(
        applicationId=application(settings), mode=STREAMING
    )
    for page in pages:
        for summary in page["jobRuns"]:
            if summary.get("name") == settings.speed_job.name:
                found.append(
                    Run(
                        id=summary["id"],
                        state=summary["state"],
                        created_at=summary["createdAt"],
                        attempt=summary.get("attempt"),
                        state_details=summary.get("stateDetails"),
                    )
                )
    return sorted(found, key=lambda run: run.created_at, reverse=True)


def _wait_ended(
    client,
    settings: Settings,
    run: Run,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> str:
    """Poll ``run`` until it has ended; its final state. DeployError after
    ``speed_job.stop_timeout_s``: a run still holding the checkpoint is never joined by
    another."""
    job = settings.speed_job
    deadline = clock() + job.stop_timeout_s
    while True:
        answer = client.get_job_run(applicationId=job.emr_application_id, jobRunId=run.id)
        state = answer["jobRun"]["state"]
        if state in ENDED:
            log_event(_log, "speed_deploy.run_ended", run_id=run.id, state=state)
            return state
        if clock() >= deadline:
            raise DeployError(
                f"run {run.id} is still {state} after {job.stop_timeout_s:.0f}s, so no new run "
                "was started (one checkpoint, one run). Run `python -m platformctl "
                "speed-deploy` again once it has ended; it starts the new run then."
            )
        log_event(_log, "speed_deploy.waiting", run_id=run.id, state=state)
        sleep(job.poll_s)


def idempotency_token(settings: Settings, found: list[Run]) -> str:
    """``clientToken`` of the start: the same for the same request made on the same view of
    the job's runs. Two deploys that both found no live run at the same moment send the same
    token, and EMR Serverless starts one run for both; once that run is listed, the next
    start has a new token."""
    request = start_job_run_request(settings, client_token="-")
    basis = json.dumps([request, sorted(run.id for run in found)], sort_keys=True)
    return hashlib.sha256(basis.encode()).hexdigest()


def deploy(
    client,
    settings: Settings,
    *,
    replace: bool = False,
    client_token: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Make exactly one run of the speed job live: keep the live one (or, ``replace``, cancel
    it, wait until it has ended and start anew), start one when none is live
    (``client_token``: the start's, else :func:`idempotency_token`). The report:
    ``action`` (``kept``, ``started`` or ``replaced``), the live ``run`` and the runs it
    ``ended`` or found ended before (``previous``)."""
    check(settings)  # a refusal needs no AWS call
    found = runs(client, settings)
    request = start_job_run_request(
        settings, client_token=client_token or idempotency_token(settings, found)
    )
    active = [run for run in found if run.state in ACTIVE]
    live = [run for run in active if run.state != "CANCELLING"]
    report: dict[str, Any] = {"application_id": request["applicationId"], "name": request["name"]}
    if live and not replace:
        if len(live) > 1:
            ids = ", ".join(run.id for run in live)
            raise DeployError(
                f"{len(live)} runs of {request['name']} are live ({ids}) on one checkpoint; "
                "keep one with `python -m platformctl speed-deploy --replace`."
            )
        log_event(_log, "speed_deploy.kept", run_id=live[0].id, state=live[0].state)
        return report | {"action": "kept", "run": live[0].report()}

    for run in live:
        client.cancel_job_run(
            applicationId=request["applicationId"],
            jobRunId=run.id,
            shutdownGracePeriodInSeconds=settings.speed_job.shutdown_grace_s,
        )
        log_event(_log, "speed_deploy.cancelling", run_id=run.id, state=run.state)
    ended = []
    for run in active:
        ended.append(run.report() | {"state": _wait_ended(client, settings, run, sleep, clock)})
    ended_before = [run for run in found if run.state in ENDED][:1]
    for run in ended_before:
        level = logging.WARNING if run.state == "FAILED" else logging.INFO
        log_event(_log, "speed_deploy.previous_run", level, run_id=run.id, state=run.state)

    started = client.start_job_run(**request)
    log_event(_log, "speed_deploy.started", run_id=started["jobRunId"], replaced=len(live))
    return report | {
        "action": "replaced" if live else "started",
        "run": {"id": started["jobRunId"], "state": "SUBMITTED"},
        "ended": ended,
        "previous": [run.report() for run in ended_before],
    }


def status(client, settings: Settings) -> dict[str, Any]:
    """The speed job's live run (or its newest, when none is live): id, state, attempt,
    when the run and its attempt started, and every live run's id (more than one is an
    incident: see docs/operations.md)."""
    found = runs(client, settings)
    active = [run for run in found if run.state in ACTIVE]
    report: dict[str, Any] = {
        "application_id": settings.speed_job.emr_application_id,
        "name": settings.speed_job.name,
        "live_runs": [run.id for run in active],
        "run": None,
    }
    newest = (active or found)[:1]
    for run in newest:
        job = client.get_job_run(applicationId=application(settings), jobRunId=run.id)["jobRun"]
        report["run"] = {
            "id": job["jobRunId"],
            "state": job["state"],
            "state_details": job.get("stateDetails") or None,
            "attempt": job.get("attempt"),
            "created_at": _iso(job.get("createdAt")),
            "started_at": _iso(job.get("startedAt")),
            "attempt_started_at": _iso(job.get("attemptCreatedAt")),
            "ended_at": _iso(job.get("endedAt")),
        }
    log_event(_log, "speed_deploy.status", **{k: v for k, v in report.items() if k != "run"})
    return report


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None
