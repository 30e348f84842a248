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

__all__ = ["ValidationFailure", "compile_validator", "to_json_schema"]

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


def compile_validator(contract: Contract) -> Callable[[dict[str, Any]], None]:
    """A function that returns None for a valid event and raises ValidationFailure otherwise.

    The ``reason`` names the rule or field that failed, e.g. ``invalid:properties.load_time_ms``
    or ``rule:identity``, so rejections can be counted by reason.
    """
    import fastjsonschema

    schema = to_json_schema(contract)
    check = fastjsonschema.compile(schema)
    rules = {
        i: str(q.name)
        for i, q in enumerate(
            q
            for q in contract.schema.quality or []
            if q.type == "custom" and q.engine == "jsonschema"
        )
    }

    descriptions = {
        str(q.name): str(q.description or q.name) for q in contract.schema.quality or []
    }

    def validate(event: dict[str, Any]) -> None:
        try:
            check(event)
        except fastjsonschema.JsonSchemaValueException as exc:
            reason = _reason(schema, rules, exc)
            detail = descriptions.get(reason.removeprefix("rule:"), exc.message)
            raise ValidationFailure(reason, detail) from None

    return validate


def _reason(schema: dict[str, Any], rules: dict[int, str], exc: Any) -> str:
    path = [str(p) for p in (exc.path or [])[1:]]
    rule = _matching_rule(schema, exc.rule_definition, rules)
    if rule is not None:
        return f"rule:{rule}"
    if exc.rule == "required":
        present = exc.value if isinstance(exc.value, dict) else {}
        missing = [name for name in exc.rule_definition if name not in present]
        return "missing:" + ".".join([*path, missing[0] if missing else "?"])
    return "invalid:" + (".".join(path) or "event")


def _matching_rule(schema: dict[str, Any], definition: Any, rules: dict[int, str]) -> str | None:
    """The name of the contract quality rule whose clause failed, if one did."""
    for index, rule in enumerate(schema.get("allOf", [])):
        clauses = [rule.get("anyOf"), rule.get("then", {}).get("required")]
        if definition is not None and definition in clauses:
            return rules.get(index)
    return None
