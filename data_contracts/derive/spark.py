"""Contract -> Spark ``StructType``: the schema both layers parse events with.

Typed objects become structs (unknown keys are dropped by ``from_json``);
free-form objects (``physicalType: json``) stay raw JSON text; timestamps
become ``TimestampType`` (ISO-8601 with offset, as the collector writes them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract, ContractError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = ["spark_type", "to_spark_schema"]


def spark_type(prop: SchemaProperty) -> DataType:
    """The Spark type of one contract field."""
    from pyspark.sql import types as T

    logical = prop.logicalType or "string"
    if logical == "object":
        if prop.physicalType == "json" or not prop.properties:
            return T.StringType()
        return T.StructType([_field(p) for p in prop.properties])
    if logical == "array":
        if prop.items is None:
            raise ContractError(f"Array field {prop.name!r} needs 'items'.")
        return T.ArrayType(spark_type(prop.items))
    simple = {
        "string": T.StringType(),
        "integer": T.LongType(),
        "number": T.DoubleType(),
        "boolean": T.BooleanType(),
        "timestamp": T.TimestampType(),
        "date": T.DateType(),
    }
    if logical not in simple:
        raise ContractError(f"Field {prop.name!r}: no Spark type for logicalType {logical!r}.")
    return simple[logical]


def _field(prop: SchemaProperty):
    from pyspark.sql import types as T

    return T.StructField(
        str(prop.name),
        spark_type(prop),
        nullable=True,  # enforced by the validator and the expectations, not by parsing
        metadata={"comment": prop.description or ""},
    )


def to_spark_schema(contract: Contract) -> StructType:
    """The event schema, in contract field order."""
    from pyspark.sql import types as T

    return T.StructType([_field(p) for p in contract.properties])
