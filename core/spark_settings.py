"""The Spark section of the settings (``WAP_SPARK__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own: where jobs get their SparkSession (local, a standalone cluster
on this machine, or any cluster manager) and how it is sized and secured.
"""

from __future__ import annotations

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

__all__ = ["SparkSettings"]


class SparkSettings(BaseModel):
    """How jobs get a SparkSession: local by default, any cluster manager by config."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    master: str = "local[2]"
    """Spark master URL: ``local[2]``, ``spark://host:7077``, ``yarn``, ``k8s://...``."""
    driver_memory: str = "2g"
    """Driver heap; on ``local`` masters this is the whole Spark JVM."""
    shuffle_partitions: int = Field(default=4, ge=1)
    """``spark.sql.shuffle.partitions``; small locally, larger on clusters."""
    ui_enabled: bool = False
    """Serve the Spark UI (off in tests and on shared machines)."""
    jars: tuple[str, ...] | None = None
    """Connector jars for ``spark.jars``; None means the locally installed set."""
    codegen_cache_entries: int = Field(default=5000, ge=100)
    """Compiled query classes a session keeps (``spark.sql.codegen.cache.maxEntries``; Spark
    keeps 100). A pipeline's queries come back every run and every step, but the literals
    they carry (a run's offsets and days) make new classes; with 100 kept they are compiled
    again and again, a fifth of a small run's JVM CPU (``bench/batch_jobs.py``, 300 events:
    66.2 -> 51.7 CPU-s). A class kept costs ~23 KB of metaspace: at most ~115 MB."""
    extra_conf: dict[str, str] = {}
    """Any further ``spark.*`` settings, e.g. S3A credentials providers."""
    driver_java_options: str = ""
    """JVM options added to the driver's own (``spark.driver.extraJavaOptions``), e.g. GC or
    JIT flags: :data:`core.spark.C1_ONLY` makes a driver that lives minutes cheaper."""
    cluster: Literal["none", "standalone"] = "none"
    """``standalone``: ``platformctl up`` runs a Spark master and two workers on this machine
    (separate JVMs, from the Spark pyspark ships) and every job submits to it: ``master``
    becomes ``spark://127.0.0.1:<master_port>`` unless set to another cluster."""
    master_port: int = Field(default=7077, ge=1, le=65535)
    """The standalone master's port (its web UI and JSON status: ``master_ui_port``)."""
    master_ui_port: int = Field(default=8980, ge=1, le=65535)
    """The standalone master's status page; worker N's is this port + N."""
    worker_port: int = Field(default=7078, ge=1, le=65535)
    """Worker 1's port; worker N listens on this port + N - 1."""
    worker_cores: int = Field(default=4, ge=1)
    """Cores each standalone worker offers (more than the machine's: three applications, the
    speed job, the step server and the SQL server, each hold executors at once)."""
    worker_memory: str = "3g"
    """Memory each standalone worker offers its executors."""
    executor_memory: str = "768m"
    """Heap of each executor on a cluster."""
    executor_cores: int = Field(default=1, ge=1)
    """Cores of each executor on a cluster."""
    executor_java_options: str = ""
    """JVM options added to each executor's on a cluster (``spark.executor.extraJavaOptions``),
    as :attr:`driver_java_options` for the driver."""
    max_cores: int | None = 2
    """Most cores one application takes on a cluster (``spark.cores.max``): on a
    standalone cluster the first application would otherwise take every core and the next
    would wait for executors. None: no limit."""
    auth_secret: SecretStr = SecretStr("local-dev-spark-secret")
    """The shared secret of a standalone cluster (``spark.authenticate``): the master, its
    workers and every application must present it, so no other local user can submit code
    to the cluster. The local default is for this machine only."""

    @field_validator("auth_secret")
    @classmethod
    def _long_enough(cls, value: SecretStr, info: ValidationInfo) -> SecretStr:
        return long_enough(f"spark.{info.field_name}", value)

    @model_validator(mode="after")
    def _standalone_master(self) -> SparkSettings:
        if self.cluster == "standalone" and self.master.startswith("local"):
            object.__setattr__(self, "master", f"spark://127.0.0.1:{self.master_port}")
        return self
