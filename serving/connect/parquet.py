"""A speed snapshot's rows as one Parquet file, written by pyarrow: no Spark job, and no
Python worker (the SQL server has none)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["write_parquet"]

_ARROW_TYPES = {
    "timestamp": lambda pa: pa.timestamp("us", tz="UTC"),
    "string": lambda pa: pa.string(),
    "bigint": lambda pa: pa.int64(),
    "double": lambda pa: pa.float64(),
    "binary": lambda pa: pa.binary(),
    "boolean": lambda pa: pa.bool_(),
}


def write_parquet(rows: list[tuple[Any, ...]], schema: StructType, path: Path) -> None:
    """``rows`` as one Parquet file of ``schema``, written by pyarrow: no Spark job, and no
    Python worker (the server has none)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fields = [pa.field(f.name, _ARROW_TYPES[f.dataType.simpleString()](pa)) for f in schema]
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in fields]
    table = pa.table(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, fields, strict=True)],
        schema=pa.schema(fields),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
