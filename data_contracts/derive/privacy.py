"""Contract -> how each field holding personal data is handled.

A field says it in two ODCS ``customProperties`` entries:

- ``anonymise``: what the collector writes to the log. ``truncate_ip``: an
  IP address, of which only the network is kept (the collector's setting
  ``ip_anonymisation`` may hash it instead, or keep it); ``hash``: a keyed
  hash (HMAC-SHA256) of the value; ``keep``: the value as sent.
- ``exposeInSql``: whether SQL views show the field (``true`` / ``false``).

Every field classified ``restricted`` must state ``anonymise``; the contract
is refused otherwise, so no personal field is added without a decision.
``exposeInSql`` is false for a restricted field unless it says true, and
true for any other field unless it says false.

>>> from data_contracts import load_contract
>>> anonymised_fields(load_contract("web_events", 1))
{'context.ip': 'truncate_ip'}
>>> hidden_in_sql(load_contract("web_events", 1))
('userId', 'traits', 'context.userAgent', 'context.ip')
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract, ContractError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ANONYMISE",
    "HASH_LENGTH",
    "FieldHandling",
    "anonymised_fields",
    "field_handling",
    "hidden_in_sql",
    "sql_view",
]

ANONYMISE = ("truncate_ip", "hash", "keep")
"""The values of a field's ``anonymise`` custom property."""
HASH_LENGTH = 64
"""Characters of a keyed hash as written (hex SHA-256): a hashed field must allow as many."""
_RESTRICTED = "restricted"


@dataclass(frozen=True)
class FieldHandling:
    """What the platform does with one field."""

    path: str
    """Dotted path, e.g. ``context.ip``; ``[]`` stands for an array's items."""
    restricted: bool
    """Whether the contract classifies the field ``restricted`` (personal data)."""
    anonymise: str
    """One of :data:`ANONYMISE`; ``keep`` for a field that states nothing."""
    expose_in_sql: bool
    """Whether SQL views may show the field."""


def _custom(prop: SchemaProperty, key: str) -> Any:
    values = [item.value for item in prop.customProperties or [] if item.property == key]
    return values[0] if values else None


def _walk(props: list[SchemaProperty], prefix: str = "") -> Iterator[tuple[str, SchemaProperty]]:
    for prop in props:
        path = f"{prefix}{prop.name}"
        yield path, prop
        yield from _walk(list(prop.properties or []), f"{path}.")
        if prop.items is not None:
            yield from _walk([prop.items.model_copy(update={"name": "[]"})], f"{path}.")


def _handling(ref: str, path: str, prop: SchemaProperty) -> FieldHandling | None:
    restricted = prop.classification == _RESTRICTED
    anonymise, expose = _custom(prop, "anonymise"), _custom(prop, "exposeInSql")
    if anonymise is None and restricted:
        raise ContractError(
            f"{ref}: field {path!r} is classified restricted but states no handling; add "
            f"customProperties [{{property: anonymise, value: <{' | '.join(ANONYMISE)}>}}] "
            "(and exposeInSql: true to show it in SQL views)."
        )
    if anonymise is None and expose is None:
        return None
    anonymise = "keep" if anonymise is None else anonymise
    if anonymise not in ANONYMISE:
        raise ContractError(
            f"{ref}: field {path!r} has anonymise {anonymise!r}; use one of {list(ANONYMISE)}."
        )
    if expose is not None and not isinstance(expose, bool):
        raise ContractError(f"{ref}: field {path!r} has exposeInSql {expose!r}; use true or false.")
    if anonymise != "keep":
        longest = (prop.logicalTypeOptions or {}).get("maxLength", HASH_LENGTH)
        if (prop.logicalType or "string") != "string" or longest < HASH_LENGTH:
            raise ContractError(
                f"{ref}: field {path!r} is anonymised ({anonymise}) but is not a string of up "
                f"to at least {HASH_LENGTH} characters (a keyed hash is {HASH_LENGTH} hex digits)."
            )
    expose = not restricted if expose is None else expose
    if "[]" in path.split(".") and (anonymise != "keep" or not expose):
        raise ContractError(
            f"{ref}: field {path!r} lies in an array, whose items' fields neither the collector "
            "rewrites nor SQL views hide; move it to an object, or state anonymise: keep and "
            "exposeInSql: true."
        )
    return FieldHandling(path, restricted, anonymise, expose)


def field_handling(contract: Contract) -> dict[str, FieldHandling]:
    """Each field that is restricted or states a handling, by path, in contract order.

    Raises :class:`ContractError` for a restricted field without ``anonymise``,
    an unknown value, or an anonymised field the collector cannot rewrite.
    """
    found = {}
    for path, prop in _walk(contract.properties):
        handling = _handling(contract.ref, path, prop)
        if handling is not None:
            found[path] = handling
    return found


def anonymised_fields(contract: Contract) -> dict[str, str]:
    """Path -> ``truncate_ip`` or ``hash``: the fields the collector rewrites."""
    return {p: h.anonymise for p, h in field_handling(contract).items() if h.anonymise != "keep"}


def hidden_in_sql(contract: Contract) -> tuple[str, ...]:
    """The paths SQL views must not show, in contract order."""
    return tuple(p for p, h in field_handling(contract).items() if not h.expose_in_sql)


def sql_view(events: DataFrame, contract: Contract) -> DataFrame:
    """``events`` (rows of the contract's event, e.g. silver) without the fields hidden in SQL.

    Every SQL exposure of events goes through this: a top-level field is
    dropped, a nested one removed from its struct (``dropFields``); a struct
    left without fields is dropped whole. Paths the frame lacks are ignored.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    nested: dict[str, list[str]] = {}
    for path in hidden_in_sql(contract):
        top, _, rest = path.partition(".")
        if top in events.columns:
            nested.setdefault(top, []).append(rest)
    for top, fields in nested.items():
        kind = events.schema[top].dataType
        whole = not isinstance(kind, StructType) or "" in fields
        if whole or {f.name for f in kind.fields} <= set(fields):
            events = events.drop(top)
        else:
            events = events.withColumn(top, F.col(top).dropFields(*fields))
    return events
