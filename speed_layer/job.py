"""The speed layer: Kafka -> parse -> dedupe -> every view -> Cassandra, continuously.

One streaming query reads, parses and deduplicates the events once for all
views, in three named steps, as in the rest of the platform:

1. :func:`read_events` - the events topic as a stream, parsed and checked
   by :mod:`views.input` as silver does (rejects are counted by reason,
   :func:`count_rejects`), into only the fields the views read
   (:func:`parse_fields`); event time is the collector's skew-corrected
   ``timestamp``; records whose event time lies in the future beyond the
   tolerance are dropped (and counted) before the watermark sees them
   (:func:`bound_event_time`), so only real time moves it; a watermark bounds
   lateness and duplicates of an event (the contract's key, ``(source_id,
   event_id)``) within it are dropped (RocksDB state).
   Each person's id (the pipeline's ``identity`` fields) is replaced by its
   keyed digest (:func:`views.digest.pseudonymise`), as gold does;
2. the view functions of :mod:`views`, unchanged, over each micro-batch's
   new events;
3. :func:`start_queries` - the query (:data:`QUERY_NAME`) whose
   ``foreachBatch`` leaves out the events of the people forgotten in the
   pipeline (:mod:`speed_layer.forgotten`) and folds every view's partials of
   the batch into the rows Cassandra holds, exactly once (:mod:`speed_layer.sink`).

:class:`speed_layer.progress.ProgressRecorder` writes the query's progress to
Cassandra, per view, where ``status`` and the serving layer read freshness. A run
starts where
:mod:`speed_layer.start` says (``python -m speed_layer reset`` opens a new one).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import SuppressionList, read_suppressions
from data_contracts import Contract
from layout import ViewTables
from pipelines import PipelineSpec
from speed_layer.forgotten import Forgotten
from speed_layer.sink import ViewsSink
from speed_layer.start import StartPosition
from views import ViewSpec
from views.digest import pseudonymise
from views.input import REJECT_REASONS, check_records, valid_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
    from pyspark.sql.types import StructType


__all__ = [
    "EDGE_METRICS",
    "QUERY_NAME",
    "REJECT_METRICS",
    "bound_event_time",
    "count_rejects",
    "forgotten_in",
    "parse_fields",
    "read_events",
    "reject_metric",
    "speed_sql_conf",
    "start_queries",
    "validated_by_collector",
]

_log = get_logger(__name__)

EDGE_METRICS = "speed_edge"
"""Name of the observed metrics of :func:`bound_event_time` in each query's progress."""

REJECT_METRICS = "speed_rejects"
"""Name of the observed metrics of :func:`count_rejects` in each query's progress."""


QUERY_NAME = StartPosition().query_name
"""The name of the speed layer's streaming query (in its progress and the Spark UI) until the
first reset or replay; a run's query is named :attr:`StartPosition.query_name`."""


def speed_sql_conf(settings: Settings) -> dict[str, str]:
    """Session settings of the streaming job (set by ``python -m speed_layer`` on its session).

    Measured by ``bench/speed_freshness.py`` (docs/benchmarks.md): per micro-batch
    cost is mostly fixed (tasks, state store loads and commits), so fewer state
    partitions and RocksDB changelog checkpointing (a commit writes the changes,
    not a snapshot) shorten every micro-batch. Empty micro-batches that move the
    watermark stay on: a drained or restarted job must persist the watermark its
    last batch reached, or late events would count after a restart.

    No checksum files beside the state files: with the state checkpoint format 1 a
    retried task writes a file of the same name as the attempt it replaces, so after an
    executor is lost a state file and its checksum can come from two attempts, and every
    later start fails with ``CHECKPOINT_FILE_CHECKSUM_VERIFICATION_FAILED`` (seen in the
    worker-kill test). Spark's own fix turns them off for format 1 (SPARK-56461), which
    4.1.3 does not have yet; the setting may change on an existing checkpoint.
    """
    return {
        "spark.sql.shuffle.partitions": str(settings.speed.state_partitions),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.checkpoint.fileChecksum.enabled": "false",
    }


def count_rejects(checked: DataFrame) -> DataFrame:
    """``checked`` (:func:`views.input.check_records`) observing its rejects per reason.

    The counts are the query's observed metrics :data:`REJECT_METRICS`, one
    per reason of :data:`views.input.REJECT_REASONS` (named by
    :func:`reject_metric`); silver writes the same rejects to its table.
    """
    from pyspark.sql import functions as F

    reason = F.col("reason")
    return checked.observe(
        REJECT_METRICS, *(F.count_if(reason == r).alias(reject_metric(r)) for r in REJECT_REASONS)
    )


def reject_metric(reason: str) -> str:
    """The observed metric of a reject reason: ``missing:event_id`` -> ``missing_event_id``."""
    return reason.replace(":", "_")


def bound_event_time(
    events: DataFrame, future_tolerance_s: float, floor: datetime | None = None
) -> DataFrame:
    """Drop, and count, the records no watermark may see.

    - event time more than ``future_tolerance_s`` ahead of the micro-batch's
      processing time (``future_rows``): one such record would move the
      watermark into the future, after which every real event is "late";
    - event time before the run's ``floor`` (``before_floor_rows``): windows
      this run did not see whole (:mod:`speed_layer.start`).

    The counts are the query's observed metrics :data:`EDGE_METRICS`.
    """
    from pyspark.sql import functions as F

    ahead_us = F.unix_micros(F.col("event_time")) - F.unix_micros(F.current_timestamp())
    future = ahead_us > F.lit(int(future_tolerance_s * 1_000_000))
    before = F.col("event_time") < F.lit(floor) if floor is not None else F.lit(False)
    return events.observe(
        EDGE_METRICS,
        F.count_if(future).alias("future_rows"),
        F.count_if(before).alias("before_floor_rows"),
    ).where(~future & ~before)


def read_events(
    spark: SparkSession,
    settings: Settings,
    pipeline: PipelineSpec,
    start: StartPosition | None = None,
    views: Sequence[ViewSpec] | None = None,
) -> DataFrame:
    """The bounded, deduplicated, watermarked stream of events ``views`` (default: the
    pipeline's) read: the topic ``settings.kafka.events_topic`` parsed with the pipeline's
    contract, into the fields they read (``speed.parse``, :func:`parse_fields`), each of the
    pipeline's identity fields a keyed digest under ``views.identity_key``, as gold's
    input."""
    start = start or StartPosition()
    views = tuple(pipeline.view_specs if views is None else views)
    contract, identity = pipeline.load_contract(), pipeline.identity
    key = settings.views.identity_key_for(settings.environment)
    raw = (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic)
        .option("startingOffsets", start.starting_offsets or settings.speed.starting_offsets)
        .option("maxOffsetsPerTrigger", settings.speed.max_offsets_per_trigger)
        .option("failOnDataLoss", "false")
        .option("includeHeaders", "true")
        .load()
    )
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    fields = parse_fields(spark, settings, views, contract)
    validated = validated_by_collector(contract) if fields is not None else None
    checked = check_records(raw, contract, tolerance, fields=fields, validated=validated)
    events = valid_of(count_rejects(checked))
    deduplicated = (
        bound_event_time(events, settings.event_time.future_tolerance_s, start.floor)
        .withWatermark("event_time", settings.speed.watermark)
        .dropDuplicatesWithinWatermark(list(contract.key))
    )
    return pseudonymise(deduplicated, identity, key)


def parse_fields(
    spark: SparkSession, settings: Settings, views: tuple[ViewSpec, ...], contract: Contract
) -> StructType | None:
    """The fields the speed layer parses records into: those ``views`` read
    (:func:`views.fields.fields_read`), or None for every field of ``contract``
    (``speed.parse = "contract"``)."""
    if settings.speed.parse == "contract":
        return None
    from views.fields import fields_read

    fields = fields_read(spark, views, contract)
    log_event(
        _log,
        "speed.parse_fields",
        contract=contract.ref,
        views=[v.name for v in views],
        fields=fields.simpleString(),
    )
    return fields


def validated_by_collector(contract: Contract) -> Column:
    """True for a record the collector checked against ``contract``'s version: it carries
    the ``contract`` header naming it (:class:`ingest.intake.Intake`)."""
    from pyspark.sql import functions as F

    ref = F.lit(contract.ref)
    return F.exists(
        "headers", lambda h: (h["key"] == "contract") & (h["value"].cast("string") == ref)
    )


def forgotten_in(
    settings: Settings, pipeline: PipelineSpec, suppressions: SuppressionList | None = None
) -> Forgotten | None:
    """The people ``pipeline``'s query leaves out: read from the suppressions topic now, and
    kept current by ``suppressions`` (the job's live list) when given; None for a pipeline
    that identifies no one."""
    if not pipeline.identity:
        return None
    at_start = read_suppressions(settings.kafka).of(pipeline.name)
    current = None if suppressions is None else (lambda: suppressions.of(pipeline.name))
    key = settings.views.identity_key_for(settings.environment).get_secret_value().encode()
    return Forgotten(key, at_start, current)


def start_queries(
    spark: SparkSession,
    settings: Settings,
    pipeline: PipelineSpec,
    *,
    views: Sequence[ViewSpec] | None = None,
    available_now: bool = False,
    start: StartPosition | None = None,
    suppressions: SuppressionList | None = None,
) -> list[StreamingQuery]:
    """Start ``pipeline``'s speed query (one, for every view of it, or of ``views``: a
    release's definitions); ``available_now`` drains the log.

    The events of the people forgotten in the pipeline are left out of every micro-batch
    (:mod:`speed_layer.forgotten`): those the suppressions topic holds as the query starts,
    and those the job's live ``suppressions`` list adds while it runs.

    ``settings`` are the pipeline's stream settings
    (:meth:`pipelines.PipelineSpec.stream_settings`); its contract parses the records and
    its identity fields are digested.

    Its checkpoint is ``<run's checkpoint dir>/views``: the Kafka offsets and the
    deduplication state. The views' state is the rows in Cassandra.
    """
    start = start or StartPosition()
    views = tuple(pipeline.view_specs if views is None else views)
    keyspace = settings.cassandra.keyspace
    tables = [ViewTables(s, keyspace, "speed", table_version=start.version) for s in views]
    checkpoint = f"{start.checkpoint_dir(settings)}/views"
    fold = settings.speed.fold
    on_driver = fold == "driver" or (fold == "auto" and settings.speed.state_partitions == 1)
    writer = (
        read_events(spark, settings, pipeline, start, views)
        .writeStream.queryName(start.query_name)
        .outputMode("append")
        .foreachBatch(
            ViewsSink(
                tables,
                settings.cassandra,
                checkpoint,
                on_driver=on_driver,
                forgotten=forgotten_in(settings, pipeline, suppressions),
                identity=pipeline.identity,
            )
        )
        .option("checkpointLocation", checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=settings.speed.trigger)
    )
    query = writer.start()
    log_event(
        _log,
        "speed.query_started",
        views=[spec.name for spec in views],
        checkpoint=checkpoint,
        generation=start.generation,
        version=start.version,
        state=start.state,
    )
    return [query]
