"""The views' input: Kafka records parsed with the contract, each a valid event or a reject.

Both layers build their views from exactly this, so they cannot disagree on
what a valid event is: the speed layer over the live topic (it counts the
rejects by reason in ``speed_progress``), silver over bronze (it writes the
rejects, with their records, to its rejects table). A record is rejected, in
this order of reasons (:data:`REJECT_REASONS`), when:

- it does not parse as the contract's event (``unparseable``);
- it lacks its ``event_id`` or ``timestamp`` (``missing:<field>``);
- its ``timestamp`` lies more than the tolerance after its ``receivedAt``
  (``invalid:timestamp_future``): no client can move a watermark or create a
  partition in the future. A time exactly at the tolerance is kept.

A valid event is the contract's columns plus ``event_time`` (the
skew-corrected ``timestamp``, the views' event time), ``event_date`` and its
Kafka coordinates (``partition``, ``offset``); optionally the whole event as
received (:data:`PAYLOAD`), fields the contract does not name included. Works on batch and streaming
DataFrames alike; callers pass ``EventTimeBounds.from_settings(settings).future_tolerance``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from views.common import EVENT_TIME

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import StructType

    from data_contracts import Contract

__all__ = [
    "PAYLOAD",
    "REJECT_REASONS",
    "check_records",
    "flat_records",
    "parse_records",
    "rejects_of",
    "valid_of",
]

REJECT_REASONS = (
    "unparseable",
    "missing:event_id",
    "missing:timestamp",
    "invalid:timestamp_future",
)
"""Why a record is not an event, in the order they are tested."""

_CORRUPT = "_corrupt_record"
"""Where ``from_json`` puts a record that is not JSON (it parses it into a struct of nulls)."""

_VALIDATED = "_validated"
"""Whether the collector checked a record against the contract (with ``fields`` only)."""

PAYLOAD = "payload"
"""The column holding the whole event as a ``VARIANT`` (``payload:properties.revenue``)."""


def check_records(
    records: DataFrame,
    contract: Contract,
    future_tolerance: timedelta,
    *,
    fields: StructType | None = None,
    validated: Column | None = None,
) -> DataFrame:
    """``partition``, ``offset``, ``raw`` (the value as text), ``e`` (the parsed event), ``reason``.

    ``records`` has Kafka's ``value``, ``partition`` and ``offset`` columns
    (a Kafka source or bronze). ``reason`` is null for a valid event.

    ``fields`` (:func:`views.fields.fields_read`) parses ``e`` into those
    fields only. Whether a record parses at all is still a question of the
    whole contract: a record is taken as parseable without a second parse only
    where ``validated`` holds (the collector checked it against this contract
    version, whose rules are stricter than the parse); any other record is
    parsed with the whole schema once more to tell. So a record is valid or a
    reject for the same reason whatever ``fields`` is.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from data_contracts.derive import to_spark_schema

    text = F.col("value").cast("string")
    # Spark parses malformed JSON into a struct of nulls; the corrupt-record column tells.
    whole = to_spark_schema(contract).add(_CORRUPT, "string")
    options = {"columnNameOfCorruptRecord": _CORRUPT}
    columns = ["partition", "offset", text.alias("raw")]
    corrupt = F.col(f"e.{_CORRUPT}")
    if fields is None:
        columns.append(F.from_json(text, whole, options).alias("e"))
    else:
        some = T.StructType([*fields.fields, T.StructField(_CORRUPT, T.StringType())])
        checked = F.coalesce(validated, F.lit(False)) if validated is not None else F.lit(False)
        columns += [F.from_json(text, some, options).alias("e"), checked.alias(_VALIDATED)]
        # The whole parse, only for a record the collector did not check.
        whole_parse = F.from_json(F.col("raw"), whole, options).getField(_CORRUPT)
        corrupt = F.coalesce(corrupt, F.when(~F.col(_VALIDATED), whole_parse))
    parsed = records.select(*columns)
    ahead_us = F.unix_micros(F.col("e.timestamp")) - F.unix_micros(F.col("e.receivedAt"))
    tolerance_us = F.lit(future_tolerance // timedelta(microseconds=1))
    unparseable, no_id, no_time, future = REJECT_REASONS
    reason = (
        F.when(F.col("e").isNull() | corrupt.isNotNull(), F.lit(unparseable))
        .when(F.col("e.event_id").isNull(), F.lit(no_id))
        .when(F.col("e.timestamp").isNull(), F.lit(no_time))
        .when(ahead_us > tolerance_us, F.lit(future))
    )
    return parsed.withColumn("reason", reason).drop(_VALIDATED)


def valid_of(checked: DataFrame, *, payload: bool = False) -> DataFrame:
    """The valid events of :func:`check_records`' output.

    ``payload`` adds the whole event as received, a ``VARIANT`` column of the
    same name: every property, trait, context and integration field, also
    those the contract does not type (silver keeps it; the speed layer, which
    holds events in its deduplication state, does not).
    """
    from pyspark.sql import functions as F

    columns = ["partition", "offset", "e.*"]
    if payload:
        columns.append(F.try_parse_json("raw").alias(PAYLOAD))
    return (
        checked.where(F.col("reason").isNull())
        .select(*columns)
        .drop(_CORRUPT)
        .withColumn(EVENT_TIME, F.col("timestamp"))
        .withColumn("event_date", F.to_date(EVENT_TIME))
    )


def rejects_of(checked: DataFrame) -> DataFrame:
    """The rejects of :func:`check_records`' output: ``partition``, ``offset``, ``raw``,
    ``reason``."""
    from pyspark.sql import functions as F

    return checked.where(F.col("reason").isNotNull()).select("partition", "offset", "raw", "reason")


def flat_records(checked: DataFrame, *, payload: bool = False) -> DataFrame:
    """Every record of :func:`check_records`' output in one frame, valid or not.

    ``partition``, ``offset``, ``reason``, ``raw`` (the record's text, for a
    reject only), the event's columns, ``event_time`` and ``event_date`` (for
    a valid event only) and, with ``payload``, the whole event as a
    ``VARIANT`` (valid events only). Its valid rows hold what
    :func:`valid_of` gives, its rejects what :func:`rejects_of` gives: silver
    parses each record once and splits the result afterwards.
    """
    from pyspark.sql import functions as F

    valid = F.col("reason").isNull()
    columns = ["partition", "offset", "reason", F.when(~valid, F.col("raw")).alias("raw"), "e.*"]
    if payload:
        columns.append(F.when(valid, F.try_parse_json("raw")).alias(PAYLOAD))
    return (
        checked.select(*columns)
        .drop(_CORRUPT)
        .withColumn(EVENT_TIME, F.when(valid, F.col("timestamp")))
        .withColumn("event_date", F.to_date(EVENT_TIME))
    )


def parse_records(
    records: DataFrame, contract: Contract, future_tolerance: timedelta, *, payload: bool = False
) -> tuple[DataFrame, DataFrame]:
    """(valid events, rejects with a reason) of Kafka records (see the module's rules)."""
    checked = check_records(records, contract, future_tolerance)
    return valid_of(checked, payload=payload), rejects_of(checked)
