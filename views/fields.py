"""The contract's fields a set of views reads, as Spark itself prunes them.

The speed layer parses each record only into the fields its views read
(:func:`views.input.check_records` with ``fields``): the fewer fields
``from_json`` builds, and each micro-batch's cached events hold, the cheaper
each event. Which fields those are is not declared by hand, where a view could
read one that was left out: Spark derives it. Every view is built over an
empty Parquet relation of the whole events schema, and the optimiser's
column and nested-field pruning (``spark.sql.optimizer.nestedSchemaPruning``)
leaves exactly what the view reads in the relation's schema; nothing runs.

Some fields are read whatever the views are (:data:`ALWAYS_READ`): a
record's validity (its id and times) and the key that deduplicates it. The
views' ``event_time`` and ``event_date`` come from ``timestamp``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from views.common import EVENT_TIME

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

    from data_contracts import Contract
    from views.spec import ViewSpec

__all__ = ["ALWAYS_READ", "events_schema", "fields_read", "prune", "union"]

ALWAYS_READ = ("event_id", "timestamp", "receivedAt")
"""Fields every parse keeps: :func:`views.input.check_records` rejects a record by them."""

_DERIVED = {EVENT_TIME: "timestamp", "event_date": "timestamp"}
"""Columns of the views' input computed from a contract field, and that field."""


def events_schema(contract_schema: StructType) -> StructType:
    """The views' input: Kafka's coordinates, the contract's fields, the event time and day
    (:func:`views.input.valid_of`)."""
    from pyspark.sql import types as T

    return T.StructType(
        [
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            *contract_schema.fields,
            T.StructField(EVENT_TIME, T.TimestampType()),
            T.StructField("event_date", T.DateType()),
        ]
    )


def _struct(**fields: DataType) -> StructType:
    from pyspark.sql import types as T

    return T.StructType([T.StructField(name, kind) for name, kind in fields.items()])


def union(a: DataType, b: DataType) -> DataType:
    """Two prunings of one type merged: a struct keeps the fields either keeps.

    >>> from pyspark.sql.types import IntegerType as Int, StringType as Str
    >>> a = _struct(p=_struct(x=Int()), t=Str())
    >>> union(a, _struct(p=_struct(y=Int()))).simpleString()
    'struct<p:struct<x:int,y:int>,t:string>'
    """
    from pyspark.sql import types as T

    if isinstance(a, T.StructType) and isinstance(b, T.StructType):
        theirs = {f.name: f for f in b.fields}
        fields = [
            T.StructField(f.name, union(f.dataType, theirs[f.name].dataType), f.nullable)
            if f.name in theirs
            else f
            for f in a.fields
        ]
        fields += [f for f in b.fields if f.name not in a.fieldNames()]
        return T.StructType(fields)
    if isinstance(a, T.ArrayType) and isinstance(b, T.ArrayType):
        return T.ArrayType(union(a.elementType, b.elementType), a.containsNull)
    return a


def prune(whole: DataType, kept: DataType) -> DataType:
    """``whole`` with only the (nested) fields ``kept`` has, in ``whole``'s order and with
    ``whole``'s metadata.

    >>> from pyspark.sql.types import IntegerType as Int, StringType as Str
    >>> whole = _struct(t=Str(), p=_struct(x=Int(), y=Int(), z=Int()), u=Str())
    >>> prune(whole, _struct(p=_struct(z=Int(), x=Int()), t=Str())).simpleString()
    'struct<t:string,p:struct<x:int,z:int>>'
    """
    from pyspark.sql import types as T

    if isinstance(whole, T.StructType) and isinstance(kept, T.StructType):
        theirs = {f.name: f.dataType for f in kept.fields}
        return T.StructType(
            [
                T.StructField(f.name, prune(f.dataType, theirs[f.name]), f.nullable, f.metadata)
                for f in whole.fields
                if f.name in theirs
            ]
        )
    if isinstance(whole, T.ArrayType) and isinstance(kept, T.ArrayType):
        return T.ArrayType(prune(whole.elementType, kept.elementType), whole.containsNull)
    return whole


def _read_by(spark: SparkSession, views: Iterable[ViewSpec], schema: StructType) -> StructType:
    """What the views read of ``schema``: each built over an empty Parquet relation of it,
    the relation's schema after the optimiser pruned it, merged over the views."""
    from pyspark.sql import types as T

    read: DataType = T.StructType([])
    with tempfile.TemporaryDirectory(prefix="view-fields-") as empty:
        # A file: URI: a relative path would be the cluster's default file system's.
        relation = spark.read.schema(schema).parquet(Path(empty).as_uri())
        for view in views:
            leaves = view.build(relation)._jdf.queryExecution().sparkPlan().collectLeaves()
            for leaf in (leaves.apply(i) for i in range(leaves.size())):
                if leaf.getClass().getSimpleName() == "FileSourceScanExec":  # what it reads
                    pruned = T.StructType.fromJson(json.loads(leaf.requiredSchema().json()))
                    read = union(read, pruned)
    return read  # type: ignore[return-value]


def fields_read(spark: SparkSession, views: Iterable[ViewSpec], contract: Contract) -> StructType:
    """The contract's Spark schema pruned to what ``views`` read, :data:`ALWAYS_READ` and
    the contract's key (whole), in the contract's order."""
    from pyspark.sql import types as T

    from data_contracts.derive import to_spark_schema

    whole = to_spark_schema(contract)
    read = _read_by(spark, views, events_schema(whole))
    derived = {_DERIVED[name] for name in read.fieldNames() if name in _DERIVED}
    wanted = {*ALWAYS_READ, *contract.key, *derived}
    kept = union(read, T.StructType([f for f in whole.fields if f.name in wanted]))
    return prune(whole, kept)  # type: ignore[return-value]
