"""Loading a versioned ODCS v3 contract and walking its fields.

A :class:`Contract` wraps the parsed Open Data Contract Standard document
(``open-data-contract-standard``'s pydantic model) with what the platform
needs: its name and version, the Kafka topic, and the event schema.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml
from open_data_contract_standard.model import (
    OpenDataContractStandard,
    SchemaObject,
    SchemaProperty,
)

__all__ = ["CONTRACTS_DIR", "Contract", "ContractError", "load_contract", "validate_odcs"]

CONTRACTS_DIR = Path(__file__).resolve().parent


class ContractError(ValueError):
    """A contract file is missing, malformed, or breaks a published version."""


@dataclass(frozen=True)
class Contract:
    """One version of one data contract."""

    name: str
    """Folder name of the contract, e.g. ``web_events``."""
    document: OpenDataContractStandard

    @property
    def id(self) -> str:
        return str(self.document.id)

    @property
    def version(self) -> str:
        return str(self.document.version)

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    @property
    def ref(self) -> str:
        """``id/version``, as written into Kafka headers and dead letters."""
        return f"{self.id}/{self.version}"

    @property
    def schema(self) -> SchemaObject:
        """The (single) schema object: the event."""
        objects = self.document.schema_ or []
        if len(objects) != 1:
            raise ContractError(f"{self.name}: expected one schema object, found {len(objects)}.")
        return objects[0]

    @property
    def properties(self) -> list[SchemaProperty]:
        return list(self.schema.properties or [])

    @property
    def key(self) -> tuple[str, ...]:
        """The primary key's fields in key order: what identifies one event.

        Consumers deduplicate on it; for web events it is ``(source_id,
        event_id)``, since a client's message id is unique only within its source.
        """
        primary = sorted(
            (p for p in self.properties if p.primaryKey), key=lambda p: p.primaryKeyPosition or 0
        )
        if not primary:
            raise ContractError(f"{self.ref}: no primaryKey field.")
        return tuple(str(p.name) for p in primary)

    @property
    def topic(self) -> str:
        return str(self.custom_property("kafka.topic"))

    def custom_property(self, key: str) -> Any:
        for item in self.document.customProperties or []:
            if item.property == key:
                return item.value
        raise ContractError(f"{self.ref}: no customProperty {key!r}.")


def validate_odcs(document: dict[str, Any], source: str) -> None:
    """Check a contract document against the ODCS JSON Schema shipped with the standard."""
    import jsonschema

    schema = json.loads(files("open_data_contract_standard").joinpath("schema.json").read_text())
    validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        details = "; ".join(
            f"{'/'.join(map(str, e.path)) or '(root)'}: {e.message[:200]}" for e in errors[:5]
        )
        raise ContractError(f"{source} is not a valid ODCS v3 document: {details}")


@cache
def load_contract(name: str, major: int) -> Contract:
    """Load ``data_contracts/<name>/v<major>.odcs.yaml``, validated against ODCS.

    Also refused: a ``restricted`` field that does not state its handling
    (:func:`data_contracts.derive.privacy.field_handling`).
    """
    from data_contracts.derive.privacy import field_handling

    path = CONTRACTS_DIR / name / f"v{major}.odcs.yaml"
    if not path.exists():
        available = sorted(p.name for p in (CONTRACTS_DIR / name).glob("v*.odcs.yaml"))
        raise ContractError(f"No contract {path}. Available for {name!r}: {available or 'none'}.")
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    validate_odcs(raw, str(path))
    contract = Contract(name, OpenDataContractStandard.model_validate(raw))
    if contract.major != major:
        raise ContractError(f"{path} declares version {contract.version}, expected {major}.x.")
    field_handling(contract)
    return contract
