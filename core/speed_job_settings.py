"""The production speed job's section of the settings (``WAP_SPEED_JOB__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own: how ``python -m platformctl speed-deploy`` runs the
streaming speed layer as an EMR Serverless job run in streaming mode (its
application, its name, the sizes of its driver and executors, how often it
may fail before EMR Serverless stops restarting it). What the job computes
is :class:`core.settings.SpeedSettings`; nothing here matters on one machine.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["WORKER_CORES", "SpeedJobSettings"]

WORKER_CORES = (1, 2, 4, 8, 16)
"""The vCPU sizes of an EMR Serverless worker (a driver or an executor)."""
_MEMORY = re.compile(r"^[1-9][0-9]*[mg]$")


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpeedJobSettings(_Section):
    """The streaming speed job on EMR Serverless (``platformctl speed-deploy``)."""

    emr_application_id: str | None = None
    """The EMR Serverless application the streaming job runs on (Terraform output
    ``WAP_SPEED_JOB__EMR_APPLICATION_ID``), apart from the batch steps' so that a backfill
    cannot take the capacity the live views need. It runs as ``batch.emr_job_role_arn``,
    from ``batch.artifacts_uri``."""
    name: str = Field(default="speed-layer", pattern=r"^[A-Za-z0-9._-]{1,64}$")
    """The job run's name: the deploy finds the speed job's runs on the application by it,
    so two deployments on one application need two names (and two checkpoint names)."""
    driver_cores: int = 2
    """vCPUs of the driver (one of 1, 2, 4, 8, 16): it plans every micro-batch and folds the
    views' partials into Cassandra."""
    driver_memory: str = "8g"
    """Heap of the driver (``spark.driver.memory``, e.g. ``8g``)."""
    executor_cores: int = 4
    """vCPUs of each executor (one of 1, 2, 4, 8, 16): one Kafka partition is read by one
    task, so an executor reads this many partitions at once."""
    executor_memory: str = "16g"
    """Heap of each executor (``spark.executor.memory``): RocksDB state and the micro-batch."""
    min_executors: int = Field(default=1, ge=1)
    """Executors kept when the log is quiet (``spark.dynamicAllocation.minExecutors``)."""
    max_executors: int | None = Field(default=None, ge=1)
    """Most executors under load; None: as many as reading every partition of every streamed
    pipeline's topic at once needs, ``ceil(sum over the pipelines of max(its partitions,
    speed.state_partitions) / executor_cores)``: more would have no task to run."""
    max_failed_attempts_per_hour: int = Field(default=5, ge=1, le=10)
    """``retryPolicy.maxFailedAttemptsPerHour``: EMR Serverless starts a failed run again
    from its checkpoint, and gives up (the run ends FAILED) after this many failures within
    an hour. 1: never restarted."""
    shutdown_grace_s: int = Field(default=120, ge=15, le=1800)
    """``shutdownGracePeriodInSeconds`` of a replace's cancel: the job gets SIGTERM, stops its
    queries after the micro-batch in flight and records its progress within this long."""
    stop_timeout_s: float = Field(default=900.0, gt=0)
    """How long ``speed-deploy --replace`` waits for the old run to end before it gives up
    without starting the new one (one checkpoint: never two runs)."""
    poll_s: float = Field(default=10.0, gt=0)
    """How often the deploy asks the old run's state while it waits."""
    log_uri: str | None = None
    """Where the job's driver and executor logs go (``s3MonitoringConfiguration.logUri``),
    e.g. ``s3://<lake bucket>/logs/spark/speed/``; None: the application's log location."""

    @field_validator("driver_cores", "executor_cores")
    @classmethod
    def _worker_cores(cls, value: int) -> int:
        if value not in WORKER_CORES:
            raise ValueError(
                f"{value} vCPUs is not an EMR Serverless worker size; use one of {WORKER_CORES}."
            )
        return value

    @field_validator("driver_memory", "executor_memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        if not _MEMORY.match(value):
            raise ValueError(f"{value!r} is not a JVM memory size such as '8g' or '4096m'.")
        return value

    @model_validator(mode="after")
    def _check(self) -> SpeedJobSettings:
        if self.max_executors is not None and self.min_executors > self.max_executors:
            raise ValueError(
                f"speed_job.min_executors={self.min_executors} exceeds "
                f"speed_job.max_executors={self.max_executors}."
            )
        if self.log_uri is not None and not self.log_uri.startswith("s3://"):
            raise ValueError(f"speed_job.log_uri={self.log_uri!r} must be an s3:// URI.")
        return self
