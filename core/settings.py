"""The platform's one typed settings object.

Library code never reads the environment: entry points call
:func:`load_settings` once and pass the frozen object (or the part of it a
component needs) down. Every field has a local default that works out of the
box on one machine; pointing the same code at real clusters is a matter of
environment variables, e.g.::

    WAP_KAFKA__BOOTSTRAP_SERVERS=b-1.msk:9098,b-2.msk:9098
    WAP_CASSANDRA__CONTACT_POINTS='["cassandra.eu-west-1.amazonaws.com"]'
    WAP_SPARK__MASTER=yarn
    WAP_LAKE__ROOT=s3a://acme-lake/delta

Nested fields use ``__`` as the delimiter; lists are JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from core.access_settings import AccessSettings
from core.batch_settings import BatchSettings
from core.collector_settings import CollectorSettings
from core.credentials import each_long_enough, long_enough, refuse_dev_secrets
from core.local_kafka import cluster_kafka
from core.local_settings import RING_ADDRESSES, RING_HEAP_MB, RING_REPLICATION, LocalSettings
from core.service_settings import LineageSettings, MonitoringSettings, SqlSettings
from core.spark_settings import SparkSettings
from core.speed_job_settings import SpeedJobSettings
from core.speed_settings import SpeedSettings
from core.view_settings import ViewSettings

__all__ = [
    "RING_ADDRESSES",
    "RING_HEAP_MB",
    "RING_REPLICATION",
    "AccessSettings",
    "AirflowSettings",
    "BatchSettings",
    "CassandraSettings",
    "CollectorSettings",
    "EventTimeSettings",
    "KafkaSettings",
    "LakeSettings",
    "LineageSettings",
    "LocalSettings",
    "MonitoringSettings",
    "ServingSettings",
    "Settings",
    "SparkSettings",
    "SpeedJobSettings",
    "SpeedSettings",
    "SqlSettings",
    "load_settings",
    "settings_env",
]

PROJECT_ROOT = Path(__file__).resolve().parents[1]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)


class KafkaSettings(_Section):
    """Where the event log lives and how its topics are shaped."""

    bootstrap_servers: str = "127.0.0.1:9092"
    """Comma-separated ``host:port`` list, as librdkafka and Spark expect it."""
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    """Listener protocol; managed clusters use ``SASL_SSL``."""
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None = None
    """SASL mechanism when ``security_protocol`` uses SASL."""
    sasl_username: str | None = None
    """SASL user; required with ``sasl_mechanism`` PLAIN or SCRAM."""
    sasl_password: SecretStr | None = None
    """SASL password; never logged."""
    events_topic: str = "web.events.v1"
    """Topic the collector writes validated events to (one per contract version)."""
    dlq_topic: str = "web.events.dlq"
    """Dead-letter topic for rejected events, with the reason attached."""
    suppressions_topic: str = "web.suppressions"
    """Compacted topic of forgotten users (key: the id): the collector drops their events."""
    audit_topic: str = "platform.audit.v1"
    """Every read of the serving API and every SQL statement, one record each (who, which
    views, outcome): the SQL server lands it in the admins' ``audit_log``."""
    topics: dict[str, str] = Field(default_factory=dict)
    """Per pipeline name, the topic to use instead of the one its declaration names (a
    staging cluster's names, a test's own topic), e.g. ``{"checkouts": "stg.checkouts.v1"}``."""
    partitions: int = Field(default=3, ge=1)
    """Partitions of the platform's topics when they are created from code."""
    replication_factor: int = Field(default=1, ge=1)
    """Replicas per partition: 1 on one machine, 3 in production."""
    min_insync_replicas: int = Field(default=1, ge=1)
    """``min.insync.replicas``: 1 locally, 2 in production with acks=all."""
    retention_ms: int = Field(default=7 * 24 * 3600 * 1000, ge=-1)
    """How long the log is kept: the window the batch layer can reprocess."""

    @model_validator(mode="after")
    def _check(self) -> KafkaSettings:
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"kafka.min_insync_replicas={self.min_insync_replicas} exceeds "
                f"kafka.replication_factor={self.replication_factor}; producers with acks=all "
                "could never write. Lower min_insync_replicas or raise the replication factor."
            )
        if self.sasl_mechanism in {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} and not (
            self.sasl_username and self.sasl_password
        ):
            raise ValueError(
                f"kafka.sasl_mechanism={self.sasl_mechanism} needs kafka.sasl_username and "
                "kafka.sasl_password (WAP_KAFKA__SASL_USERNAME / WAP_KAFKA__SASL_PASSWORD)."
            )
        return self

    def spark_options(self) -> dict[str, str]:
        """The same connection as options of Spark's Kafka source (the Java client's names).

        The Java client takes SASL credentials as a JAAS line, not as
        librdkafka's ``sasl.username``/``sasl.password``.
        """
        options = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username and self.sasl_password:
            module = (
                "org.apache.kafka.common.security.plain.PlainLoginModule"
                if self.sasl_mechanism == "PLAIN"
                else "org.apache.kafka.common.security.scram.ScramLoginModule"
            )
            user = _jaas_quoted(self.sasl_username)
            secret = _jaas_quoted(self.sasl_password.get_secret_value())
            options["kafka.sasl.jaas.config"] = (
                f"{module} required username={user} password={secret};"
            )
        return options

    def client_config(self) -> dict[str, str]:
        """librdkafka settings shared by every producer, consumer and admin client."""
        config = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            config["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username and self.sasl_password:
            config["sasl.username"] = self.sasl_username
            config["sasl.password"] = self.sasl_password.get_secret_value()
        return config


def _jaas_quoted(value: str) -> str:
    """A JAAS option value in double quotes: backslashes and quotes escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class CassandraSettings(_Section):
    """The CQL store holding the speed and serving views."""

    contact_points: tuple[str, ...] = ("127.0.0.1",)
    """Hosts the driver contacts first; the rest of the ring is discovered."""
    port: int = Field(default=9042, ge=1, le=65535)
    """Native protocol port."""
    keyspace: str = Field(default="web_activity", pattern=r"^[a-z][a-z0-9_]{0,47}$")
    """Keyspace of the platform's tables."""
    replication: dict[str, str | int] = {"class": "SimpleStrategy", "replication_factor": 1}
    """Keyspace replication, e.g. ``{"class": "NetworkTopologyStrategy", "eu-west": 3}``."""
    local_datacenter: str | None = None
    """Data centre for the driver's DC-aware load balancing; None on one node."""
    username: str | None = None
    """User for PasswordAuthenticator; None when auth is off (local)."""
    password: SecretStr | None = None
    """Password for ``username``; never logged."""
    ssl: bool = False
    """Use TLS (managed services such as Amazon Keyspaces require it)."""
    request_timeout_s: float = Field(default=10.0, gt=0)
    """Client-side timeout of one request."""
    schema_timeout_s: float = Field(default=120.0, gt=0)
    """Client-side timeout of one schema change (a keyspace or table created, altered or
    dropped, a truncation): a node applies schema changes one at a time and rewrites its
    schema tables for each, so on a busy node one may wait far longer than a read."""
    token_aware: bool = True
    """Send each request to a replica of its partition. The driver then reads the cluster's
    token ring and the schema of every keyspace when it connects (and a table's again after
    each schema change). Off, the node a request reaches coordinates it: the same on one
    node, and a connect reads no schema (a node holding thousands of tables answers that
    read slowly)."""

    @model_validator(mode="after")
    def _check(self) -> CassandraSettings:
        if (self.username is None) != (self.password is None):
            raise ValueError(
                "cassandra.username and cassandra.password must be set together "
                "(WAP_CASSANDRA__USERNAME / WAP_CASSANDRA__PASSWORD)."
            )
        return self


class EventTimeSettings(_Section):
    """How far from the receive time an event's time may lie (see ``core.event_time``)."""

    future_tolerance_s: float = Field(default=60.0, ge=0, le=1e12)
    """An event time (after clock-skew correction) more than this ahead of ``receivedAt`` is
    clamped to ``receivedAt`` by the collector, and never moves the speed layer's watermark."""
    max_age_s: int | None = Field(default=None, ge=60)
    """The oldest event time the live endpoints accept, in seconds before ``receivedAt``;
    None: the retention of the events topic. Older events go through ``/v1/import``."""
    import_max_age_days: int = Field(default=3653, ge=1)
    """The oldest event time ``/v1/import`` (historical import) accepts, in days."""


class ServingSettings(_Section):
    """The serving layer: merged answers over HTTP for dashboards and analysts."""

    host: str = "127.0.0.1"
    """Interface the serving API listens on."""
    port: int = Field(default=8090, ge=1, le=65535)
    """HTTP port of the serving API and dashboard."""
    api_tokens: dict[str, SecretStr] = {"local-analyst": SecretStr("local-dev-read-token")}
    """Analyst name -> read-only bearer token. The local default is for this machine only."""
    max_range_days: int = Field(default=400, ge=1)
    """Longest time range one query may ask for (whole days are read from the day rollups)."""
    max_buckets: int = Field(default=2880, ge=1)
    """Most buckets one timeseries may return (two days of minutes)."""
    max_top_partitions: int = Field(default=2000, ge=1)
    """Most partitions one top-N may read: a month costs about 200-300 (day and hour rollups,
    minutes at the edges and after the boundary); a day published without rollups, 1,440."""
    workers: int = Field(default=2, ge=1)
    """Server processes (uvicorn workers), each with its own Cassandra session."""
    pointer_cache_s: float = Field(default=1.0, ge=0)
    """How long a worker reuses the boundary, day versions and speed progress it read."""
    batch_cache_entries: int = Field(default=4096, ge=0)
    """Published batch partition reads kept per worker (immutable per version); 0 disables."""
    result_cache_entries: int = Field(default=4096, ge=0)
    """Answers kept per worker for identical questions (keyed by the pointers they read, so
    a publish or a speed micro-batch makes a new key); 0 keeps none, and identical requests
    arriving together still share one computation."""
    result_cache_s: float = Field(default=30.0, ge=0)
    """Longest an answer over speed windows is reused (a new speed micro-batch seen in the
    pointers already makes it a new question)."""
    final_result_cache_s: float = Field(default=600.0, ge=0)
    """Longest an answer over batch windows only (final) is reused."""
    stale_answer_s: float = Field(default=10.0, ge=0)
    """While the answer over a new speed micro-batch is computed, requests for it get the
    answer over the previous micro-batch (``cache.stale``) if it is at most this old,
    instead of waiting; 0: they wait. Never across a publish (a new batch generation)."""
    block_cache_entries: int = Field(default=2048, ge=0)
    """Merged immutable top-N blocks kept per worker (runs of batch windows, closed speed
    hours)."""
    hot_path: bool = True
    """Answer kept answers of the dashboard's routes in front of FastAPI (``serving/hot.py``);
    false sends every request through the framework (same answers, more CPU per request)."""
    max_boundary_age_s: float = Field(default=24 * 3600, gt=0)
    """A batch boundary older than this makes ``/health`` answer ``degraded`` (status 200).
    Keep it well below ``speed.ttl_s`` (3 days): once a boundary is older than the TTL,
    windows after it lose their speed rows and are answered as unavailable. With
    ``batch.period = day`` the boundary is normally up to two days old: raise it to match."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """How long a connection may take to send a request's line and headers before the server
    closes it (also the wait for the first request on a new connection); a client sending
    half a request (slow loris) is dropped after this."""
    requests_per_connection: int = Field(default=1000, ge=0)
    """Requests one keep-alive connection may make; the last is answered
    ``connection: close`` and the client reconnects (0: no limit), so that clients keeping
    a few connections open spread over the workers again (nginx's ``keepalive_requests``)."""
    keep_alive_s: float = Field(default=75.0, gt=0)
    """How long an idle client connection stays open. Keep it above the idle timeout of the
    clients and load balancers in front (HTTP libraries: about 5 s; AWS ALB: 60 s), so the
    server never closes a connection just as a client reuses it (the client would get a
    reset, not an answer)."""

    @field_validator("api_tokens")
    @classmethod
    def _long_enough(
        cls, value: dict[str, SecretStr], info: ValidationInfo
    ) -> dict[str, SecretStr]:
        return each_long_enough(f"serving.{info.field_name}", value)


class LakeSettings(_Section):
    """Where the Delta tables (bronze, silver, gold) live."""

    root: str = str(PROJECT_ROOT / ".platform" / "lake")
    """Local path or object-store URI (``s3a://bucket/prefix``) of the Delta root."""
    checkpoint_root: str = str(PROJECT_ROOT / ".platform" / "checkpoints")
    """Root of the streaming checkpoints (one sub-directory per query)."""


class AirflowSettings(_Section):
    """The local Airflow used to schedule batch pipelines."""

    home: Path = PROJECT_ROOT / ".platform" / "airflow"
    """AIRFLOW_HOME for the local scheduler and its SQLite metadata database."""
    venv: Path = PROJECT_ROOT / ".platform" / "airflow-venv"
    """Airflow's own virtualenv (kept apart from the Spark environment)."""
    dags_folder: Path = PROJECT_ROOT / "dags"
    """Folder of DAG files."""
    api_port: int = Field(default=8080, ge=1, le=65535)
    """Port of the local api-server: the UI, the REST API and the execution API tasks report to."""
    parallelism: int = Field(default=2, ge=1)
    """Task instances running at once (LocalExecutor workers); each Spark task is a JVM, so
    keep it near the number of cores."""
    dag_reparse_s: int = Field(default=120, ge=1)
    """How often the DAG processor parses a DAG file it parsed before (Airflow's
    ``[dag_processor] min_file_process_interval``, 30 s by default): what the DAG files
    build from (the pipelines' declarations) is seen within this. An edited DAG file is
    parsed at once. Each parse is a process importing Airflow and the declarations, on the
    cores serving answers from: every 30 s it was serving's largest stall."""
    admin_password: SecretStr = SecretStr("local-dev-airflow-password")
    """Password of Airflow's ``admin`` user (the UI's login, and what ``platformctl`` asks its
    REST API tokens with). The local default is for this machine only."""

    @field_validator("admin_password")
    @classmethod
    def _long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return long_enough(f"airflow.{info.field_name}", value)


class Settings(BaseSettings):
    """Everything the platform needs to know about where it runs."""

    model_config = SettingsConfigDict(
        env_prefix="WAP_",
        env_nested_delimiter="__",
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,  # a refused secret is not echoed into a log
    )

    environment: Literal["local", "dev", "prod"] = "local"
    """Which deployment this is; only labels logs and guards local-only actions."""
    kafka: KafkaSettings = KafkaSettings()
    collector: CollectorSettings = CollectorSettings()
    event_time: EventTimeSettings = EventTimeSettings()
    speed: SpeedSettings = SpeedSettings()
    speed_job: SpeedJobSettings = SpeedJobSettings()
    cassandra: CassandraSettings = CassandraSettings()
    spark: SparkSettings = SparkSettings()
    lake: LakeSettings = LakeSettings()
    batch: BatchSettings = BatchSettings()
    views: ViewSettings = ViewSettings()
    serving: ServingSettings = ServingSettings()
    sql: SqlSettings = SqlSettings()
    access: AccessSettings = AccessSettings()
    airflow: AirflowSettings = AirflowSettings()
    local: LocalSettings = LocalSettings()
    monitoring: MonitoringSettings = MonitoringSettings()
    lineage: LineageSettings = LineageSettings()

    @model_validator(mode="before")
    @classmethod
    def _kafka_follows_the_local_cluster(cls, data: Any) -> Any:
        """With ``local.kafka_nodes=3`` the apps talk to the three brokers ``platformctl`` runs.

        Done before validation because the sections are frozen; a section that is
        invalid on its own is left to the normal validation to report.
        """
        if not isinstance(data, dict):
            return data
        try:
            local = LocalSettings.model_validate(data.get("local", {}))
            kafka = KafkaSettings.model_validate(data.get("kafka", {}))
        except ValidationError:
            return data
        if local.kafka_nodes == 1:
            return data
        return {
            **data,
            "kafka": cluster_kafka(kafka, local.kafka_nodes, local.kafka_controller_port),
        }

    @model_validator(mode="after")
    def _cassandra_follows_the_local_ring(self) -> Settings:
        """With a local ring the apps contact its three nodes and keep three replicas of
        every row, unless ``cassandra.contact_points`` / ``cassandra.replication`` are set."""
        if self.local.cassandra_nodes == 1:
            return self
        unset = {"contact_points", "replication"} - self.cassandra.model_fields_set
        ring = {
            "contact_points": self.local.cassandra_ring_addresses,
            "replication": dict(RING_REPLICATION),
        }
        update = {name: value for name, value in ring.items() if name in unset}
        if update:
            object.__setattr__(self, "cassandra", self.cassandra.model_copy(update=update))
        return self

    @model_validator(mode="after")
    def _no_dev_secrets_outside_local(self) -> Settings:
        refuse_dev_secrets(self)  # core.credentials: every secret's rules in one place
        return self


def _reveal(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, BaseModel):
        return {name: _reveal(getattr(value, name)) for name in type(value).model_fields}
    if isinstance(value, dict):
        return {key: _reveal(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [_reveal(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def settings_env(settings: Settings) -> dict[str, str]:
    """``WAP_*`` variables that recreate ``settings`` in a child process (secrets included)."""
    env = {"WAP_ENVIRONMENT": settings.environment}
    for name in type(settings).model_fields:
        section = getattr(settings, name)
        if isinstance(section, BaseModel):
            env[f"WAP_{name.upper()}"] = json.dumps(_reveal(section))
    return env


def child_env(settings: Settings, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process running with ``settings``: ``base`` (default: this
    process's) without its ``WAP_*`` variables, which would override the sections'
    values (``WAP_SPEED__PIPELINES`` beats ``WAP_SPEED``), plus :func:`settings_env`."""
    base = os.environ if base is None else base
    kept = {k: v for k, v in base.items() if not k.startswith("WAP_")}
    return kept | settings_env(settings)


def load_settings(**overrides: object) -> Settings:
    """Read settings from ``WAP_*`` environment variables; call only at entry points."""
    return Settings(**overrides)  # type: ignore[arg-type]
