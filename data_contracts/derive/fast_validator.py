"""Contract -> msgspec types: the collector's fast validator.

The same field rules as :mod:`data_contracts.derive.json_schema` (types,
bounds, lengths, patterns, accepted values, required fields, and the
cross-field quality rules), compiled into ``msgspec.Struct`` types that
validate an event in about a microsecond instead of the ~17 us of the
generated JSON Schema code. Unknown fields pass through, as in the JSON
Schema. ``tests/unit/data_contracts`` checks that both validators agree.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec
from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract, ContractError
from data_contracts.derive.json_schema import INTEGER_RANGE, ValidationFailure, compile_rule

__all__ = ["compile_fast_validator", "struct_for"]

_SIMPLE: dict[str, Any] = {"string": str, "number": float, "integer": int, "boolean": bool}
_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<field>[^`]+)`")


def _meta(prop: SchemaProperty) -> msgspec.Meta | None:
    options = prop.logicalTypeOptions or {}
    kwargs = {
        key: options[name]
        for name, key in [
            ("minLength", "min_length"),
            ("maxLength", "max_length"),
            ("pattern", "pattern"),
            ("minimum", "ge"),
            ("maximum", "le"),
        ]
        if name in options
    }
    if prop.logicalType in {"timestamp", "date"}:
        kwargs = {"tz": True} if prop.logicalType == "timestamp" else {}
    if prop.logicalType == "integer":
        kwargs["ge"] = max(kwargs.get("ge", INTEGER_RANGE[0]), INTEGER_RANGE[0])
        kwargs["le"] = min(kwargs.get("le", INTEGER_RANGE[1]), INTEGER_RANGE[1])
    return msgspec.Meta(**kwargs) if kwargs else None


def _type(prop: SchemaProperty, owner: str) -> Any:
    logical = prop.logicalType or "string"
    if prop.enum:
        base: Any = Literal[tuple(item.value for item in prop.enum)]  # type: ignore[misc]
    elif logical == "object":
        base = struct_for(prop.properties, f"{owner}_{prop.name}") if prop.properties else dict
    elif logical == "array":
        if prop.items is None:
            raise ContractError(f"Array field {prop.name!r} needs 'items'.")
        base = list[_type(prop.items, f"{owner}_{prop.name}")]  # type: ignore[misc]
    elif logical == "timestamp":
        base = datetime
    elif logical in _SIMPLE:
        base = _SIMPLE[logical]
    else:
        raise ContractError(f"Field {prop.name!r}: unsupported logicalType {logical!r}.")
    meta = _meta(prop)
    return Annotated[base, meta] if meta is not None else base


def struct_for(properties: list[SchemaProperty] | None, name: str) -> type[msgspec.Struct]:
    """A Struct type with one field per contract property (required ones first)."""
    props = list(properties or [])
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = [
        (str(p.name), _type(p, name)) for p in props if p.required
    ]
    fields += [
        (str(p.name), _type(p, name) | msgspec.UnsetType, msgspec.UNSET)
        for p in props
        if not p.required
    ]
    return msgspec.defstruct(name, fields, forbid_unknown_fields=False)


def _reason(error: msgspec.ValidationError) -> str:
    text = str(error)
    at = _AT.search(text)
    path = at.group("path") if at else ""
    missing = _MISSING.search(text)
    if missing:
        return "missing:" + ".".join(p for p in (path, missing.group("field")) if p)
    return "invalid:" + (path or "event")


def compile_fast_validator(contract: Contract) -> Callable[[dict[str, Any]], None]:
    """Like :func:`~data_contracts.derive.json_schema.compile_validator`, on msgspec."""
    event_type = struct_for(contract.properties, f"{contract.schema.name}_v{contract.major}")
    rules = [
        (str(q.name), str(q.description or q.name), compile_rule(q.implementation))
        for q in contract.schema.quality or []
        if q.type == "custom" and q.engine == "jsonschema" and isinstance(q.implementation, dict)
    ]
    convert = msgspec.convert

    def validate(event: dict[str, Any]) -> None:
        if not isinstance(event, dict):
            raise ValidationFailure("invalid:event", "an event must be a JSON object")
        try:
            convert(event, event_type)
        except msgspec.ValidationError as exc:
            raise ValidationFailure(_reason(exc), str(exc)) from None
        for name, description, holds in rules:
            if not holds(event):
                raise ValidationFailure(f"rule:{name}", description)

    return validate
