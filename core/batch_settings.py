"""The batch layer's section of the settings (``WAP_BATCH__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own: the pipelines' schedule and periods, the lake tables'
retention, how a DAG task runs its step (the step server, ``spark-submit`` or
EMR Serverless) and the step server's own address, credential and limits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.credentials import long_enough

__all__ = ["BatchSettings"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class BatchSettings(_Section):
    """The scheduled batch layer: bronze -> silver -> gold -> quality gate -> publish."""

    schedule: str | None = "@hourly"
    """Schedule of the pipelines' ingest DAGs (a cron expression or an Airflow preset);
    None: they run only when triggered."""
    maintenance_schedule: str | None = "@daily"
    """Schedule of the maintenance DAGs (OPTIMIZE, VACUUM, superseded versions); None: on demand."""
    period: Literal["minute", "hour", "day"] = "hour"
    """Granularity of the batch boundary: it only moves by whole periods."""
    lateness_s: int = Field(default=300, ge=0)
    """How long after a period ends its events may still arrive; later ones wait for the
    next run (which rewrites the day)."""
    reports_dir: Path = PROJECT_ROOT / ".platform" / "quality"
    """Where quality-gate reports are written (JSON and Markdown per run)."""
    log_retention: str = "interval 30 days"
    """``delta.logRetentionDuration`` of every lake table (time travel window)."""
    deleted_file_retention: str = "interval 7 days"
    """``delta.deletedFileRetentionDuration``: what VACUUM keeps for readers and time travel."""
    checkpoint_interval: int = Field(default=10, ge=1)
    """``delta.checkpointInterval``: commits between Delta log checkpoints."""
    vacuum_retention_hours: int = Field(default=168, ge=0)
    """VACUUM keeps files newer than this; below 168 h Delta's safety check must be off."""
    erasure_retention_hours: int = Field(default=168, ge=0)
    """VACUUM keeps the files a ``forget`` rewrote this long at most (it uses the smaller of
    this and ``vacuum_retention_hours``): erased rows leave the storage only then."""
    superseded_version_grace_s: int = Field(default=3600, ge=0)
    """Published batch versions replaced longer ago than this are deleted from Cassandra."""
    reconcile_max_differing_windows: int = Field(default=0, ge=0)
    """The ``reconcile`` step fails (exit code 4, an alert) when, for any view, more closed
    windows than this differ between the published batch rows and the speed rows."""
    reconcile_margin_s: int = Field(default=60, ge=0)
    """Slack on the clock-derived edges of a reconciliation: an event counts as possibly late
    for the speed layer from ``watermark - future tolerance - margin`` behind its
    ``receivedAt``, and windows are compared up to ``batch cut - watermark - margin``."""
    reconcile_ttl_margin_s: int = Field(default=3600, ge=0)
    """Windows older than ``now - speed TTL + this`` are not reconciled: their speed rows may
    expire while the step reads them."""
    spark_submit: str = str(PROJECT_ROOT / ".venv" / "bin" / "spark-submit")
    """The ``spark-submit`` the DAGs run jobs with (the Spark environment's, not Airflow's)."""
    runner: Literal["server", "submit", "emr_serverless"] = "server"
    """How a DAG task runs its step. ``server``: it submits the step to the batch step server
    (``python -m batch_layer serve``, one long-lived Spark application: no JVM start per task);
    ``submit``: a ``spark-submit`` per task against ``WAP_SPARK__MASTER`` (a cluster);
    ``emr_serverless``: a job run of the EMR Serverless application ``emr_application_id``
    from the artifact at ``artifacts_uri`` (``python -m platformctl package``)."""
    emr_application_id: str | None = None
    """The EMR Serverless application the steps run on (Terraform output
    ``spark_application_id``); required with ``runner=emr_serverless``."""
    emr_job_role_arn: str | None = None
    """The role the job runs as (Terraform output ``spark_job_role_arn``)."""
    artifacts_uri: str | None = None
    """Where ``platformctl package`` output was uploaded, e.g.
    ``s3://lake-bucket/artifacts/0.1.0``: the entry point, the wheel, the Python environment
    archive and the jars."""
    emr_aws_conn_id: str = "aws_default"
    """The Airflow connection the EMR operator calls AWS with (MWAA: its execution role)."""
    step_server_host: str = "127.0.0.1"
    """Interface of the batch step server."""
    step_server_port: int = Field(default=8095, ge=1, le=65535)
    """Port of the batch step server."""
    step_server_token: SecretStr = SecretStr("local-dev-step-token")
    """The bearer token the step server asks of every ``/steps`` request (``Authorization:
    Bearer <token>``); the DAGs' tasks send it. The local default is for this machine only."""
    subject_key: SecretStr = SecretStr("local-dev-subject-key-for-this-machine-only")
    """Key of the digest that names a forgotten person in reports, logs, the ledger and the
    tables' history (:func:`core.suppressions.subject_of`, HMAC-SHA256). Keep it secret and
    stable: a new key makes earlier forgets' digests unmatchable. The local default is for
    this machine only."""
    step_timeout_s: float = Field(default=4 * 3600, gt=0)
    """``execution_timeout`` of every batch task: a step still running after this long is
    cancelled and its task fails (and retries), so a hung step cannot hold the pipeline's
    pool for good. Raise it for backfills of many days."""
    step_history: int = Field(default=200, ge=1)
    """Finished step requests the step server keeps for ``GET /steps/{id}`` and ``/health``;
    the oldest are forgotten first."""
    step_header_timeout_s: float = Field(default=10.0, gt=0)
    """How long the step server waits for each read from a connection (a request's line, its
    headers, its body) before it closes it: a client that sends half a request is dropped."""

    @field_validator("step_server_token", "subject_key")
    @classmethod
    def _long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return long_enough(f"batch.{info.field_name}", value)

    @model_validator(mode="after")
    def _check(self) -> BatchSettings:
        missing = [
            name
            for name in ("emr_application_id", "emr_job_role_arn", "artifacts_uri")
            if self.runner == "emr_serverless" and not getattr(self, name)
        ]
        if missing:
            names = ", ".join(f"WAP_BATCH__{name.upper()}" for name in missing)
            raise ValueError(f"batch.runner=emr_serverless needs {names}.")
        return self
