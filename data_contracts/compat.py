"""Compatibility of a contract with its published versions.

A published version is frozen as a *shape* (every field path with its type,
whether it is required, and its accepted values) in
``data_contracts/<name>/published/<version>.json``. Within a major version,
the contract may only change compatibly: add optional fields, add accepted
values, loosen nothing a reader relies on. Removing a field, retyping it,
changing whether it is required or dropping an accepted value is breaking and
needs a new major version (``v<N+1>.odcs.yaml``) on a topic of its own, which
runs beside the old one (``docs/operations.md``, "Changing a contract").

    python -m data_contracts check      # every contract vs its published versions
    python -m data_contracts publish    # freeze the current versions (never overwrites)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from open_data_contract_standard.model import SchemaProperty

from data_contracts.contract import CONTRACTS_DIR, Contract, ContractError, load_contract

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


def _topic_of_major(topic: str, major: int) -> str | None:
    """``topic`` with its major-version suffix set to ``major``; None without such a suffix.

    >>> _topic_of_major("web.events.v1", 2)
    'web.events.v2'
    """
    match = re.fullmatch(r"(.*[._-]v)[0-9]+", topic)
    return f"{match[1]}{major}" if match else None


def _shared_topic(contract: Contract) -> list[str]:
    """The other major versions of the contract that name its Kafka topic."""
    others = []
    for path in sorted((CONTRACTS_DIR / contract.name).glob("v*.odcs.yaml")):
        major = int(path.name.split(".")[0][1:])
        if major != contract.major:
            others.append(load_contract(contract.name, major))
    return [other.ref for other in others if other.topic == contract.topic]


def check_compatibility(contract: Contract) -> None:
    """Raise ContractError if the contract breaks any published version of its major line,
    or names the topic of another of its major versions (a major version has a topic of
    its own, so the readers of one never receive the events of another)."""
    current = shape_of(contract)
    report = []
    for version, shape in published_shapes(contract).items():
        if version == contract.version and shape != current:
            report.append(f"published version {version} was edited in place")
        report += [f"vs {version}: {problem}" for problem in breaking_changes(shape, current)]
    if report:
        major = contract.major + 1
        topic = _topic_of_major(contract.topic, major) or "of its own"
        raise ContractError(
            f"{contract.ref} breaks its published versions:\n  - "
            + "\n  - ".join(report)
            + f"\nKeep {contract.major}.x compatible (add optional fields, add accepted "
            f"values), or make the change a new major version: "
            f"data_contracts/{contract.name}/v{major}.odcs.yaml, version {major}.0.0, on a "
            f"new topic {topic}, run beside {contract.topic} "
            '(docs/operations.md, "Changing a contract").'
        )
    shared = _shared_topic(contract)
    if shared:
        own = _topic_of_major(contract.topic, contract.major) or "a topic of its own"
        raise ContractError(
            f"{contract.ref} writes to {contract.topic}, the topic of {', '.join(shared)}: "
            f"each major version has its own topic; set customProperties kafka.topic "
            f"(and the schema's physicalName) to {own}."
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
