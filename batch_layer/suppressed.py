"""Which rows of the lake are a user's: predicates for ``forget`` and the suppression filter.

A row is user ``ID``'s when one of its pipeline's identity fields is ``ID``
(``PipelineSpec.identity``, e.g. ``userId`` and ``anonymousId`` for the SDK
events, ``buyer_id`` for checkouts); a pipeline that names none holds no
one's rows. Each function takes those ``fields``:

- :func:`event_rows` on silver's typed columns;
- :func:`record_rows` on a raw Kafka value (bronze's ``value``, the rejects'
  ``raw``), its fields read with ``get_json_object``;
- :func:`parsed_rows` on records silver parsed into staging
  (:mod:`batch_layer.staging`): a reject's raw text, an event's typed columns;
- :func:`without_suppressed` drops the records of every suppressed user from
  raw records (bronze ingest, silver and its gate), so no rebuild, backfill
  or replay of the log brings a forgotten user back; :func:`without_suppressed_parsed`
  does the same to parsed records, so the silver gate counts bronze and
  staging alike whether or not a ``forget`` came between silver and the gate.

Each predicate compares the identities with ``who``: the id itself where the
lake is only read, or :data:`FORGOTTEN`, the column of a one-row source holding
the id, where rows are deleted (:func:`delete_rows`, a ``MERGE``). The commit
Delta keeps in a table's history then names columns only: neither the id nor a
digest of it, which anyone holding candidate ids could match.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from core.frames import local_frame

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import Column, DataFrame

__all__ = [
    "FORGOTTEN",
    "delete_rows",
    "event_rows",
    "parsed_rows",
    "record_rows",
    "without_suppressed",
    "without_suppressed_parsed",
]


FORGOTTEN = "s._forgotten"
"""The id to delete, as the erasing ``MERGE``'s source names it (:func:`delete_rows`)."""


def _either(columns: list[Column], who: str | Column) -> Column:
    """Whether any of ``columns`` is ``who`` (an id, or a column holding one); false (never
    null) otherwise, and always false when there are no ``columns``."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit(False)
    other = F.lit(who) if isinstance(who, str) else who
    matches = [F.coalesce(column == other, F.lit(False)) for column in columns]
    condition = matches[0]
    for match in matches[1:]:
        condition = condition | match
    return condition


def _identities(column: str, fields: Sequence[str]) -> list[Column]:
    """The ``fields`` of the JSON value in ``column`` (null when absent)."""
    from pyspark.sql import functions as F

    text = F.col(column).cast("string")
    return [F.get_json_object(text, f"$.{field}") for field in fields]


def _parsed_identities(columns: Collection[str], fields: Sequence[str]) -> list[Column]:
    """The ``fields`` of a parsed record: read from its raw text, which a reject keeps,
    else its typed column (an event, parsed from the same text) when the contract has one
    of that name (``columns``: the parsed records' columns)."""
    from pyspark.sql import functions as F

    return [
        F.coalesce(raw, F.col(field)) if field in columns else raw
        for raw, field in zip(_identities("raw", fields), fields, strict=True)
    ]


def event_rows(who: str | Column, fields: Sequence[str]) -> Column:
    """Silver rows of ``who``: any of ``fields`` (typed columns) is ``ID``."""
    from pyspark.sql import functions as F

    return _either([F.col(field) for field in fields], who)


def record_rows(who: str | Column, fields: Sequence[str], column: str = "value") -> Column:
    """Raw records of ``who``: ``column`` (bytes or text) holds one Kafka value."""
    return _either(_identities(column, fields), who)


def parsed_rows(who: str | Column, fields: Sequence[str], columns: Collection[str]) -> Column:
    """Parsed records of ``who`` (``raw`` for a reject, typed columns for an event), in a
    frame of ``columns``."""
    return _either(_parsed_identities(columns, fields), who)


def delete_rows(table: DeltaTable, user_id: str, rows: Column) -> None:
    """Delete from ``table`` the rows of ``user_id``: ``rows`` is a predicate on
    :data:`FORGOTTEN`.

    A ``MERGE`` of a one-row source holding the id, matched rows deleted: the predicate the
    commit records in the table's history names columns, never the id or its digest
    (e.g. ``event_rows(F.col(FORGOTTEN), spec.identity)``).
    """
    source = local_frame(table.toDF().sparkSession, [(user_id,)], "_forgotten string")
    table.alias("t").merge(source.alias("s"), rows).whenMatchedDelete().execute()


def without_suppressed(
    records: DataFrame, suppressed: Collection[str], fields: Sequence[str], column: str = "value"
) -> DataFrame:
    """``records`` without those of the ``suppressed`` users (unchanged when there are none).

    One broadcast anti-join per identity field on the ids parsed from ``column``:
    equi-joins, so a long list costs a hash lookup per record.
    """
    return _without(records, suppressed, _identities(column, fields))


def without_suppressed_parsed(
    records: DataFrame, suppressed: Collection[str], fields: Sequence[str]
) -> DataFrame:
    """Parsed ``records`` (staging's) without those of the ``suppressed`` users."""
    return _without(records, suppressed, _parsed_identities(records.columns, fields))


def _without(
    records: DataFrame, suppressed: Collection[str], identities: list[Column]
) -> DataFrame:
    """``records`` but those any of whose ``identities`` is ``suppressed``."""
    if not suppressed or not identities:
        return records
    from pyspark.sql import functions as F

    ids = local_frame(records.sparkSession, [(i,) for i in sorted(suppressed)], "_sid string")
    kept = records
    for n, identity in enumerate(identities):
        name = f"_identity{n}"
        kept = (
            kept.withColumn(name, identity)
            .join(F.broadcast(ids), F.col(name) == F.col("_sid"), "left_anti")
            .drop(name)
        )
    return kept
