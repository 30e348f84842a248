"""Compatibility of a contract with its published versions.

A published version is frozen as a *shape* (every field path with its type,
whether it is required, and its accepted values) in
``data_contracts/<name>/published/<version>.json``. Within a major version,
the contract may only change compatibly: add optional fields, add accepted
values, loosen nothing a reader relies on. Removing a field, retyping it,
changing whether it is required or dropping an accepted value is breaking and
needs a new major version (a new topic).

    python -m data_contracts check      # every contract vs its published versions
    python -m data_contracts publish    # freeze the current versions (never overwrites)
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import CONTRACTS_DIR, Contract, ContractError

__all__ = [
    "FieldShape",
    "breaking_changes",
    "check_compatibility",
    "publish",
    "published_shapes",
    "shape_of",
]


@dataclass(frozen=True)
class FieldShape:
    """What readers and writers of a field rely on."""

    type: str
    required: bool
    enum: tuple[str, ...] | None = None


def _walk(props: list[SchemaProperty], prefix: str = "") -> dict[str, FieldShape]:
    shapes: dict[str, FieldShape] = {}
    for prop in props:
        path = f"{prefix}{prop.name}"
        enum = tuple(sorted(str(e.value) for e in prop.enum)) if prop.enum else None
        logical = prop.logicalType or "string"
        if logical == "object" and prop.physicalType == "json":
            logical = "json"
        shapes[path] = FieldShape(logical, bool(prop.required), enum)
        if prop.properties:
            shapes |= _walk(prop.properties, f"{path}.")
        if prop.items is not None:
            shapes |= _walk([prop.items.model_copy(update={"name": "[]"})], f"{path}.")
    return shapes


def shape_of(contract: Contract) -> dict[str, FieldShape]:
    """The shape of a contract's event schema, by dotted field path."""
    return _walk(contract.properties)


def breaking_changes(old: dict[str, FieldShape], new: dict[str, FieldShape]) -> list[str]:
    """Every change from ``old`` to ``new`` that breaks an existing reader or writer."""
    problems = []
    for path, before in sorted(old.items()):
        after = new.get(path)
        if after is None:
            problems.append(f"{path}: removed")
            continue
        if after.type != before.type:
            problems.append(f"{path}: type changed from {before.type} to {after.type}")
        if after.required != before.required:
            change = "optional to required" if after.required else "required to optional"
            problems.append(f"{path}: changed from {change}")
        if before.enum is not None:
            dropped = sorted(set(before.enum) - set(after.enum or ()))
            if after.enum is not None and dropped:
                problems.append(f"{path}: accepted values removed: {dropped}")
    for path, after in sorted(new.items()):
        if path not in old and after.required:
            problems.append(f"{path}: new required field (existing producers do not send it)")
    return problems


def _published_dir(contract: Contract) -> Path:
    return CONTRACTS_DIR / contract.name / "published"


def published_shapes(contract: Contract) -> dict[str, dict[str, FieldShape]]:
    """The frozen shapes of the published versions in the contract's major line."""
    shapes = {}
    for path in sorted(_published_dir(contract).glob(f"{contract.major}.*.json")):
        raw = json.loads(path.read_text())
        shapes[path.stem] = {
            field: FieldShape(s["type"], s["required"], tuple(s["enum"]) if s["enum"] else None)
            for field, s in raw["fields"].items()
        }
    return shapes


def check_compatibility(contract: Contract) -> None:
    """Raise ContractError if the contract breaks any published version of its major line."""
    current = shape_of(contract)
    report = []
    for version, shape in published_shapes(contract).items():
        if version == contract.version and shape != current:
            report.append(f"published version {version} was edited in place")
        report += [f"vs {version}: {problem}" for problem in breaking_changes(shape, current)]
    if report:
        raise ContractError(
            f"{contract.ref} breaks its published versions:\n  - "
            + "\n  - ".join(report)
            + f"\nKeep {contract.major}.x compatible, or publish a new major version "
            f"(v{contract.major + 1}.odcs.yaml, a new topic)."
        )


def publish(contract: Contract) -> Path:
    """Freeze the contract's current version; refuse to change a published one."""
    check_compatibility(contract)
    path = _published_dir(contract) / f"{contract.version}.json"
    document = {
        "contract": contract.id,
        "version": contract.version,
        "fields": {field: asdict(shape) for field, shape in shape_of(contract).items()},
    }
    text = json.dumps(document, indent=2, sort_keys=True) + "\n"
    if path.exists() and path.read_text() != text:
        raise ContractError(f"{path} is published and differs; bump the contract version.")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
