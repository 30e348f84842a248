"""The speed layer's section of the settings (``WAP_SPEED__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own: what the streaming speed layer computes and how (watermark,
trigger, parse, fold, state, replays and their switch, the recount after a
forget). How the production job runs on EMR Serverless is
:class:`core.speed_job_settings.SpeedJobSettings`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["SpeedSettings"]


class SpeedSettings(BaseModel):
    """The streaming speed layer."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    watermark: str = "10 minutes"
    """How late an event may arrive and still update its window; later ones go to batch."""
    trigger: str = "1 second"
    """Micro-batch interval."""
    starting_offsets: Literal["earliest", "latest"] = "earliest"
    """Where a query without a checkpoint starts reading the log."""
    max_offsets_per_trigger: int = Field(default=200_000, ge=1)
    """Upper bound of records per micro-batch (smooths catch-up after downtime)."""
    ttl_s: int = Field(default=3 * 24 * 3600, ge=3600)
    """Lifetime of speed rows in Cassandra; must exceed the batch layer's delay."""
    checkpoint_name: str = "speed"
    """Sub-directory of the checkpoint root (each pipeline's runs under
    ``<checkpoint_name>/<pipeline>``); a new name starts new (Kappa) runs."""
    pipelines: list[str] = Field(default_factory=list)
    """The pipelines this speed job streams (``WAP_SPEED__PIPELINES='["checkouts"]'``);
    empty: every declared pipeline whose ``speed.live`` is set."""
    scheduler: Literal["FAIR", "FIFO"] = "FIFO"
    """How the job's pipelines share the driver's task slots: ``FIFO``, Spark's default, in
    the order jobs were submitted; ``FAIR``, each pipeline's Spark jobs in a scheduler pool
    of its own (named after it), so one pipeline's small micro-batch is not queued behind
    every task of another's. On two cores FAIR made the smaller pipeline fresher and the
    larger one staler, no better at worst (docs/benchmarks.md)."""
    restart_backoff_s: float = Field(default=10.0, gt=0)
    """A pipeline whose query failed while others run is restarted in the job after this
    long (doubling, at most 5 minutes); the job exits when none is left running."""
    state_partitions: int = Field(default=1, ge=1)
    """``spark.sql.shuffle.partitions`` of the speed layer: deduplication state store
    instances and the tasks of each view's aggregation per micro-batch. Each costs a fixed
    time per micro-batch, and the four views' jobs run side by side, so keep it low
    locally (1 on two cores). A checkpoint keeps the value it was created with."""
    parse: Literal["views", "contract"] = "views"
    """What a record is parsed into: ``views``, only the fields the pipeline's views read
    (:mod:`views.fields`), a record the collector did not check also with the whole
    contract, to tell whether it is valid; ``contract``, every field of the contract."""
    fold: Literal["auto", "driver", "executors"] = "auto"
    """Where a micro-batch's partials are folded into Cassandra: ``driver`` (collected, a
    thread per view), ``executors`` (``foreachPartition``, the rows never leave them), or
    ``auto``: the driver when the views have one partition (``state_partitions`` 1),
    where it is the same single loop without a task slot or Python worker per view."""
    replay_max_lag: int = Field(default=1000, ge=0)
    """A Kappa replay has caught up when its Kafka lag (records behind the newest, the most
    of any partition) stays at or under this ..."""
    replay_sustain_s: float = Field(default=10.0, ge=0)
    """... for this many seconds; then serving switches to its version."""
    replay_grace_s: float = Field(default=300.0, ge=0)
    """How long a replaced speed version is kept after the switch before its tables are
    dropped (readers holding the old pointer finish; serving caches pointers for seconds)."""
    replay_poll_s: float = Field(default=2.0, gt=0)
    """How often the speed job looks for a replay to start, a switch or a version to drop."""
    forget_recount_after_s: float = Field(default=30.0, ge=0)
    """After a person is forgotten in a pipeline, its speed job replays the log after the
    batch boundary without them (their rows still count them) once no other forget came
    for this long: a burst of forgets costs one replay."""
    metrics_host: str = "127.0.0.1"
    """Interface of the speed job's Prometheus endpoint (``/metrics``)."""
    metrics_port: int = Field(default=8096, ge=1, le=65535)
    """Port of the speed job's Prometheus endpoint."""
