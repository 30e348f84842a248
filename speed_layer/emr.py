"""The production speed job as an EMR Serverless job run in streaming mode: its request.

Pure data, no AWS import: :mod:`platformctl.speed_deploy` sends
:func:`start_job_run_request` to ``StartJobRun`` and keeps one such run
alive. The job runs ``speed_entry.py`` (``python -m speed_layer``) from the
same artifact as the batch steps (:mod:`core.emr`), as the same job role, so
one Spark runtime, one role and one upload serve both layers.

What makes it a long-lived, self-healing stream rather than a batch step:

- ``mode="STREAMING"`` and ``executionTimeoutMinutes=0``: no 12-hour timeout;
- ``retryPolicy.maxFailedAttemptsPerHour``: EMR Serverless starts a failed
  attempt again, from the checkpoint, until that many fail within an hour;
- the checkpoint root on S3 (``lake.checkpoint_root``), handed to the driver
  so every attempt and every replacement resumes the same queries;
- dynamic allocation up to one task slot per Kafka partition of every streamed
  pipeline: the job grows past one machine with the topics, and shrinks when
  the log is quiet.

>>> from core.settings import (BatchSettings, KafkaSettings, LakeSettings, Settings,
...                            SpeedJobSettings, SpeedSettings)
>>> s = Settings(
...     kafka=KafkaSettings(partitions=12),
...     lake=LakeSettings(checkpoint_root="s3a://lake/checkpoints"),
...     batch=BatchSettings(emr_job_role_arn="arn:aws:iam::1:role/job",
...                         artifacts_uri="s3://lake/artifacts/0.2.0"),
...     speed=SpeedSettings(pipelines=["web_events"]),
...     speed_job=SpeedJobSettings(emr_application_id="00speed", executor_cores=4))
>>> request = start_job_run_request(s, client_token="t-1")
>>> request["mode"], request["executionTimeoutMinutes"], request["retryPolicy"]
('STREAMING', 0, {'maxFailedAttemptsPerHour': 5})
>>> request["jobDriver"]["sparkSubmit"]["entryPoint"]
's3://lake/artifacts/0.2.0/speed_entry.py'
>>> max_executors(s)
3
"""

from __future__ import annotations

import math

from core.emr import artifact_params, artifacts_root
from core.settings import Settings

__all__ = [
    "ENTRY_POINT",
    "STREAMING",
    "check",
    "job_driver",
    "max_executors",
    "start_job_run_request",
]

ENTRY_POINT = "speed_entry.py"
STREAMING = "STREAMING"
_OBJECT_STORES = ("s3://", "s3a://")


def max_executors(settings: Settings) -> int:
    """Most executors the job may hold: ``speed_job.max_executors``, or enough task slots to
    read every Kafka partition (and run every state partition) of a micro-batch of every
    streamed pipeline at once: their queries run side by side in the one job."""
    from speed_layer.streams import streamed

    job = settings.speed_job
    if job.max_executors is not None:
        return job.max_executors
    state = settings.speed.state_partitions
    tasks = sum(max(spec.partitions_of(settings), state) for spec in streamed(settings))
    return max(job.min_executors, math.ceil(tasks / job.executor_cores))


def _missing(settings: Settings) -> list[str]:
    """What a production speed job needs and ``settings`` lacks, one sentence each."""
    missing = []
    if not settings.speed_job.emr_application_id:
        missing.append(
            "speed_job.emr_application_id is not set (WAP_SPEED_JOB__EMR_APPLICATION_ID, the "
            "Terraform output of the same name)"
        )
    if not settings.batch.emr_job_role_arn:
        missing.append(
            "batch.emr_job_role_arn is not set (WAP_BATCH__EMR_JOB_ROLE_ARN, the role the "
            "job runs as)"
        )
    if not settings.batch.artifacts_uri:
        missing.append(
            "batch.artifacts_uri is not set (WAP_BATCH__ARTIFACTS_URI, where the output of "
            "`platformctl package --pyenv` was uploaded)"
        )
    if not settings.lake.checkpoint_root.startswith(_OBJECT_STORES):
        missing.append(
            f"lake.checkpoint_root={settings.lake.checkpoint_root!r} is not on S3 "
            "(WAP_LAKE__CHECKPOINT_ROOT=s3a://<lake bucket>/checkpoints): a worker's disk is "
            "lost with every restart, and the job would start over"
        )
    return missing


def check(settings: Settings) -> None:
    """ValueError naming everything a production speed job lacks, before any AWS call."""
    missing = _missing(settings)
    if missing:
        raise ValueError("the speed job cannot be deployed: " + "; ".join(missing) + ".")


def job_driver(settings: Settings) -> dict:
    """``jobDriver`` of ``StartJobRun``: ``python -m speed_layer`` from the artifact, sized by
    ``speed_job`` and pointed at the checkpoint root the deploy checked."""
    job = settings.speed_job
    arguments = [arg for name in settings.speed.pipelines for arg in ("--pipeline", name)]
    # What the checkpoint is, and the state partitions it was created with, come from the
    # settings the deploy checked, not from whatever the application's defaults say.
    env = {
        "WAP_LAKE__CHECKPOINT_ROOT": settings.lake.checkpoint_root,
        "WAP_SPEED__CHECKPOINT_NAME": settings.speed.checkpoint_name,
        "WAP_SPEED__STATE_PARTITIONS": str(settings.speed.state_partitions),
    }
    conf = {
        "spark.driver.cores": str(job.driver_cores),
        "spark.driver.memory": job.driver_memory,
        "spark.executor.cores": str(job.executor_cores),
        "spark.executor.memory": job.executor_memory,
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": str(job.min_executors),
        "spark.dynamicAllocation.initialExecutors": str(job.min_executors),
        "spark.dynamicAllocation.maxExecutors": str(max_executors(settings)),
        **{f"spark.emr-serverless.driverEnv.{name}": value for name, value in env.items()},
    }
    params = [*artifact_params(settings), *(f"--conf {key}={value}" for key, value in conf.items())]
    return {
        "sparkSubmit": {
            "entryPoint": f"{artifacts_root(settings)}/{ENTRY_POINT}",
            "entryPointArguments": arguments,
            "sparkSubmitParameters": " ".join(params),
        }
    }


def start_job_run_request(settings: Settings, *, client_token: str) -> dict:
    """The keyword arguments of ``StartJobRun`` for the speed job (``client_token``: unique per
    start, so a retried call cannot start a second run)."""
    check(settings)
    job = settings.speed_job
    request = {
        "applicationId": job.emr_application_id,
        "clientToken": client_token,
        "executionRoleArn": settings.batch.emr_job_role_arn,
        "name": job.name,
        "mode": STREAMING,
        "executionTimeoutMinutes": 0,
        "retryPolicy": {"maxFailedAttemptsPerHour": job.max_failed_attempts_per_hour},
        "jobDriver": job_driver(settings),
    }
    if job.log_uri:
        request["configurationOverrides"] = {
            "monitoringConfiguration": {"s3MonitoringConfiguration": {"logUri": job.log_uri}}
        }
    return request
