"""Contract -> JSON Schema -> a compiled validator for the collector.

The JSON Schema (draft-07) is derived field by field from the contract:
``logicalType`` gives the JSON type, ``logicalTypeOptions`` the bounds and
formats, ``enum`` the accepted values, ``required`` the required list, and the
schema-level ``quality`` rules with ``engine: jsonschema`` add cross-field
rules (e.g. userId or anonymousId). It is compiled once with fastjsonschema
into plain Python, which validates an event in microseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import Contract, ContractError

__all__ = [
    "INTEGER_RANGE",
    "ValidationFailure",
    "compile_rule",
    "compile_validator",
    "to_json_schema",
]

_JSON_TYPES = {
    "string": "string",
    "number": "number",
    "integer": "integer",
    "boolean": "boolean",
    "object": "object",
    "array": "array",
    "timestamp": "string",
    "date": "string",
}
INTEGER_RANGE = (-(2**63), 2**63 - 1)
"""The values an ``integer`` field may hold whatever its own bounds: a 64-bit signed
integer, the ``bigint`` both layers parse it into (a larger one would not parse there)."""
_OPTIONS = ("minLength", "maxLength", "pattern", "minimum", "maximum", "format")
_FORMAT_OF = {"timestamp": "date-time", "date": "date"}


def _property_schema(prop: SchemaProperty) -> dict[str, Any]:
    logical = prop.logicalType or "string"
    if logical not in _JSON_TYPES:
        raise ContractError(f"Field {prop.name!r}: unsupported logicalType {logical!r}.")
    schema: dict[str, Any] = {"type": _JSON_TYPES[logical]}
    if prop.description:
        schema["description"] = prop.description
    if logical in _FORMAT_OF:
        schema["format"] = _FORMAT_OF[logical]
    for option in _OPTIONS:
        if prop.logicalTypeOptions and option in prop.logicalTypeOptions:
            schema[option] = prop.logicalTypeOptions[option]
    if logical == "integer":
        schema["minimum"] = max(schema.get("minimum", INTEGER_RANGE[0]), INTEGER_RANGE[0])
        schema["maximum"] = min(schema.get("maximum", INTEGER_RANGE[1]), INTEGER_RANGE[1])
    if prop.enum:
        schema["enum"] = [item.value for item in prop.enum]
    if logical == "object" and prop.properties:
        schema |= _object_schema(prop.properties)
    if logical == "array" and prop.items:
        schema["items"] = _property_schema(prop.items)
    return schema


def _object_schema(properties: list[SchemaProperty]) -> dict[str, Any]:
    return {
        "properties": {p.name: _property_schema(p) for p in properties},
        "required": [p.name for p in properties if p.required],
        # Segment calls carry fields beyond the contract (integrations, writeKey ...):
        # typed fields are checked, the rest passes through.
        "additionalProperties": True,
    }


def to_json_schema(contract: Contract) -> dict[str, Any]:
    """The contract's event schema as a draft-07 JSON Schema document."""
    schema: dict[str, Any] = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$id": f"urn:contract:{contract.id}:{contract.version}",
        "title": contract.schema.name,
        "type": "object",
        **_object_schema(contract.properties),
    }
    rules = [
        q.implementation
        for q in contract.schema.quality or []
        if q.type == "custom" and q.engine == "jsonschema" and isinstance(q.implementation, dict)
    ]
    if rules:
        schema["allOf"] = rules
    return schema


class ValidationFailure(ValueError):
    """An event broke the contract; ``reason`` is short and stable, ``detail`` human."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def compile_rule(rule: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """A fast predicate for the rule shapes contracts use; any other shape via fastjsonschema.

    Cross-field rules are checked in plain Python because fastjsonschema evaluates
    ``anyOf`` and ``if`` by raising and catching exceptions, which dominated the
    collector's validation time.
    """
    any_of = rule.get("anyOf")
    if set(rule) == {"anyOf"} and all(set(b) == {"required"} for b in any_of):
        groups = [tuple(branch["required"]) for branch in any_of]

        def any_group_present(event: dict[str, Any]) -> bool:
            for group in groups:
                for name in group:
                    if name not in event:
                        break
                else:
                    return True
            return False

        return any_group_present
    condition, then = rule.get("if", {}), rule.get("then", {})
    consts = {k: v.get("const") for k, v in condition.get("properties", {}).items()}
    if (
        set(rule) == {"if", "then"}
        and set(condition) <= {"properties", "required"}
        and all(set(v) == {"const"} for v in condition.get("properties", {}).values())
        and set(then) == {"required"}
    ):
        needed = tuple(then["required"])
        conditions = tuple(consts.items())

        def then_holds(event: dict[str, Any]) -> bool:
            for key, value in conditions:
                if event.get(key, _ABSENT) != value:
                    return True  # the condition does not apply
            return all(name in event for name in needed)

        return then_holds
    import fastjsonschema

    check = fastjsonschema.compile(rule)

    def generic(event: dict[str, Any]) -> bool:
        try:
            check(event)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    return generic


_ABSENT = object()


def compile_validator(contract: Contract) -> Callable[[dict[str, Any]], None]:
    """A function that returns None for a valid event and raises ValidationFailure otherwise.

    The ``reason`` names the field or the contract rule that failed, e.g.
    ``invalid:properties.load_time_ms``, ``missing:event_id`` or ``rule:identity``,
    so rejections can be counted by reason.
    """
    import fastjsonschema

    schema = to_json_schema(contract)
    fields_only = {key: value for key, value in schema.items() if key != "allOf"}
    check = fastjsonschema.compile(fields_only)
    rules = [
        (str(q.name), str(q.description or q.name), compile_rule(q.implementation))
        for q in contract.schema.quality or []
        if q.type == "custom" and q.engine == "jsonschema" and isinstance(q.implementation, dict)
    ]

    def validate(event: dict[str, Any]) -> None:
        try:
            check(event)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ValidationFailure(_reason(exc), exc.message) from None
        for name, description, holds in rules:
            if not holds(event):
                raise ValidationFailure(f"rule:{name}", description)

    return validate


def _reason(exc: Any) -> str:
    path = [str(p) for p in (exc.path or [])[1:]]
    if exc.rule == "required":
        present = exc.value if isinstance(exc.value, dict) else {}
        missing = [name for name in exc.rule_definition if name not in present]
        return "missing:" + ".".join([*path, missing[0] if missing else "?"])
    return "invalid:" + (".".join(path) or "event")
