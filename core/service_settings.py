"""The sections of the settings for the SQL server, monitoring and lineage
(``WAP_SQL__*``, ``WAP_MONITORING__*``, ``WAP_LINEAGE__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of their own: they configure how the platform is queried and watched,
not its data path.
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

__all__ = ["LineageSettings", "MonitoringSettings", "SqlSettings"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class SqlSettings(_Section):
    """The SQL server: Spark Connect over the serving views and silver's events, read-only."""

    host: str = "127.0.0.1"
    """Interface the Spark Connect server listens on (``0.0.0.0`` to serve other machines,
    behind TLS: see docs/sql.md)."""
    port: int = Field(default=15002, ge=1, le=65535)
    """Spark Connect's gRPC port (its usual 15002): ``sc://host:15002/;token=...``."""
    health_port: int = Field(default=15003, ge=1, le=65535)
    """HTTP port of the server's ``/health`` (catalog refresh age, views, sessions)."""
    token: SecretStr = SecretStr("local-dev-sql-token")
    """The token of the ``sql-service`` identity (admins' team): the server's own health
    query presents it (``;token=`` in the URL); ``POST /v1/sql`` sends its caller's
    credential, and analysts use their own tokens (docs/sql.md). The local default is for
    this machine only."""
    driver_memory: str = "1g"
    """Heap of the server's Spark driver (it is the whole Spark JVM on ``local`` masters)."""
    refresh_s: float = Field(default=15.0, gt=0)
    """How often the server re-reads the boundaries, the speed rows and silver's version."""
    max_rows: int = Field(default=10_000, ge=1)
    """Most rows ``POST /v1/sql`` returns; a query with more is refused (add a LIMIT)."""
    time_limit_s: float = Field(default=60.0, gt=0)
    """Longest a statement runs before it is cancelled, over Spark Connect (the server's
    watchdog) and ``POST /v1/sql`` alike."""
    max_statement_chars: int = Field(default=100_000, ge=1_000)
    """Longest SQL text (statement, expression) the server parses; a longer one is refused
    before Spark's parser sees it."""
    max_statement_depth: int = Field(default=40, ge=4, le=200)
    """Deepest parenthesis nesting of a SQL text (outside literals and comments); deeper is
    refused in microseconds instead of taking the parser's time and memory."""
    max_plan_depth: int = Field(default=256, ge=64)
    """Deepest nesting of a Spark Connect request (``spark.connect.grpc.marshallerRecursionLimit``):
    a DataFrame chained further than this is refused when it is received."""
    max_result_size: str = "256m"
    """``spark.driver.maxResultSize``: most result bytes one statement brings to the driver
    (a quarter of ``driver_memory``), so one answer cannot exhaust it."""
    max_value_bytes: int = Field(default=16 * 1024 * 1024, ge=1024 * 1024)
    """Largest value (and row) a statement may make, by the bound the server computes before
    it runs (``repeat``, ``lpad``, ``sequence``... with constant counts): over it, refused,
    so no constant the optimizer folds on the driver can exhaust its heap."""
    max_partitions: int = Field(default=8, ge=1)
    """Most partitions a statement may ask for (``range``'s fourth argument, ``REPARTITION``,
    ``repartition()``); more is refused. Keep it below the server's task slots (on this machine
    :attr:`executors` x :attr:`executor_slots`, 9): Spark hands a job every free slot and takes
    none back, so a statement of more partitions than slots leaves the others none."""
    detached_timeout_s: float = Field(default=15.0, gt=0)
    """A statement whose client went away (closed, killed, network gone) is interrupted at
    most about twice this long after (a result stream lasts this long before the client
    reattaches; a statement not reattached for this long is ended)."""
    health_timeout_s: float = Field(default=10.0, gt=0)
    """``/health`` runs ``SELECT 1`` over Spark Connect; not answered within this, the server
    is not answering (503)."""
    health_interval_s: float = Field(default=10.0, gt=0)
    """How often the supervisor (``python -m serving.connect --supervise``, the local
    ``sql`` service) asks ``/health``."""
    restart_after: int = Field(default=3, ge=1)
    """The supervisor restarts the server after this many failed ``/health`` in a row (or at
    once when it exits)."""
    executors: int = Field(default=3, ge=1, le=16)
    """Executor JVMs of a server on this machine (a ``local`` master becomes Spark's
    ``local-cluster``): the analysts' tasks run there, never in the driver's JVM. A task that
    ignores its cancellation costs its executor (:attr:`task_kill_timeout_s`), which is started
    again; the others serve meanwhile, so keep more of them than a statement's stuck tasks."""
    executor_slots: int = Field(default=3, ge=1, le=64)
    """Task slots of each executor (its ``cores``). Together more than the machine's cores and
    than ``spark.default.parallelism``: a statement of the default partitioning leaves slots
    free for the other sessions, and a few long tasks do not take them all."""
    executor_memory: str = "1g"
    """Heap of each executor (its ``spark.executor.memory``); an out-of-memory error ends that
    executor, never the driver."""
    executor_nice: int = Field(default=10, ge=0, le=19)
    """CPU priority (``nice``) of the executors' task threads on this machine, below the
    driver's: its gRPC, planning and ``/health`` never wait behind analysts' tasks."""
    task_kill_timeout_s: float = Field(default=30.0, gt=0)
    """A cancelled task still running this long after (Java's regex engine, for one, ignores
    interrupts) ends its executor (``spark.task.reaper.killTimeout``). Not less: an executor's
    first task fetches the jars and cannot be interrupted meanwhile, which took over 10 s on
    a busy machine, and a cancelled ``SELECT 1`` of ``/health`` then ended its executor."""
    settable: tuple[str, ...] = (
        "spark.sql.session.timeZone",
        "spark.sql.ansi.enabled",
        "spark.sql.timestampType",
        "spark.sql.legacy.timeParserPolicy",
        "spark.sql.datetime.java8API.enabled",
        "spark.sql.repl.eagerEval.enabled",
        "spark.sql.repl.eagerEval.maxNumRows",
        "spark.sql.repl.eagerEval.truncate",
    )
    """The session settings analysts may SET (SQL ``SET``, ``spark.conf.set``); every other
    is refused, so no SET lifts a limit, adds a catalog or turns on a server feature."""

    @field_validator("token")
    @classmethod
    def _long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return long_enough(f"sql.{info.field_name}", value)

    def url(self) -> str:
        """The Spark Connect URL with the token, as ``SparkSession.builder.remote`` takes it.

        On this machine it names ``localhost``: the client then sends the token over a
        local channel; to any other host it speaks TLS (docs/sql.md: production).
        """
        local = self.host in {"127.0.0.1", "0.0.0.0", "localhost"}
        host = "localhost" if local else self.host
        return f"sc://{host}:{self.port}/;token={self.token.get_secret_value()}"


class MonitoringSettings(_Section):
    """Prometheus: what it scrapes locally, and the thresholds of the platform's alert rules.

    The rules (``infra/local/prometheus/alerts.yml.tmpl``) are rendered with these values;
    a production Prometheus loads the same rendered file.
    """

    prometheus_port: int = Field(default=9090, ge=1, le=65535)
    """Port of the local Prometheus (its UI, its API and ``/api/v1/alerts``)."""
    scrape_interval_s: int = Field(default=15, ge=1)
    """How often Prometheus scrapes every target and evaluates the rules."""
    freshness_alert_s: int = Field(default=300, ge=1)
    """``SpeedLayerStale`` fires when a view's speed freshness (now - newest event reflected)
    stays above this ..."""
    freshness_alert_for: str = "2m"
    """... for this long (a Prometheus duration)."""
    publish_alert_periods: int = Field(default=3, ge=1)
    """``BatchNotPublishing`` fires when a view's boundary is older than this many batch
    periods (plus the lateness)."""
    error_ratio_alert: float = Field(default=0.05, gt=0, le=1)
    """``CollectorErrors`` fires when this share of the collector's requests answer 5xx."""
    pushgateway_url: str | None = None
    """A Prometheus Pushgateway the batch steps push their metrics to when they run as
    jobs of their own (``spark-submit``, EMR Serverless), e.g. ``http://pushgateway:9091``;
    the step server is scraped instead. None: not pushed."""
    lifecycle_api: bool = False
    """Start the local Prometheus with ``--web.enable-lifecycle`` (``POST /-/reload`` and
    ``/-/quit`` for anyone who reaches its port). Off: it reloads its configuration on
    ``SIGHUP`` (only its own OS user can send one) or a restart."""
    metrics_token: SecretStr = SecretStr("local-dev-metrics-token")
    """The operators' bearer token (``Authorization: Bearer <token>``): Prometheus scrapes
    every service's ``/metrics`` with it, and ``/health`` shows its figures only to it (a
    load balancer's probe without it gets the status alone). It reads figures, never data.
    The local default is for this machine only."""

    @field_validator("metrics_token")
    @classmethod
    def _long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return long_enough(f"monitoring.{info.field_name}", value)


class LineageSettings(_Section):
    """OpenLineage events of the batch steps (Spark's OpenLineage listener)."""

    enabled: bool = True
    """Emit a START and a COMPLETE event, with input and output datasets, per Spark action of
    every batch step."""
    transport: Literal["file", "http"] = "file"
    """``file``: one JSON event per line in ``location``; ``http``: POST to ``url`` (Marquez,
    DataHub, a cloud catalogue's OpenLineage endpoint)."""
    location: Path = PROJECT_ROOT / ".platform" / "lineage" / "openlineage.jsonl"
    """The events file of the ``file`` transport."""
    url: str | None = None
    """The endpoint of the ``http`` transport, e.g. ``http://marquez:5000``."""
    namespace: str = "web-activity-platform"
    """The OpenLineage namespace of the batch jobs."""

    @model_validator(mode="after")
    def _check(self) -> LineageSettings:
        if self.enabled and self.transport == "http" and not self.url:
            raise ValueError("lineage.transport=http needs lineage.url (WAP_LINEAGE__URL).")
        return self
