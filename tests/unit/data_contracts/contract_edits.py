"""Edited copies of the real web-events contract, for tests of what derives from it.

Each copy goes through the same ODCS validation as the file, so every case
built here is a valid ODCS document.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from open_data_contract_standard.model import OpenDataContractStandard

from data_contracts import Contract
from data_contracts.contract import CONTRACTS_DIR, validate_odcs

RAW = yaml.safe_load((CONTRACTS_DIR / "web_events" / "v1.odcs.yaml").read_text(encoding="utf-8"))
"""The web-events contract document as parsed from its file."""


def contract_from(document: dict[str, Any]) -> Contract:
    """``document`` as a contract, after checking it is valid ODCS."""
    validate_odcs(document, "edited copy")
    return Contract("web_events", OpenDataContractStandard.model_validate(document))


def _field(document: dict[str, Any], path: str) -> dict[str, Any]:
    props = document["schema"][0]["properties"]
    *parents, name = path.split(".")
    for parent in parents:
        props = next(p for p in props if p["name"] == parent)["properties"]
    return next(p for p in props if p["name"] == name)


def edited(**fields: dict[str, Any]) -> Contract:
    """The contract with keys of fields replaced (None removes one); ``a__b`` is path ``a.b``."""
    document = copy.deepcopy(RAW)
    for path, changes in fields.items():
        field = _field(document, path.replace("__", "."))
        for key, value in changes.items():
            if value is None:
                field.pop(key, None)
            else:
                field[key] = value
    return contract_from(document)


def removed(*paths: str) -> Contract:
    """The contract without the fields at ``paths`` (dotted)."""
    document = copy.deepcopy(RAW)
    for path in paths:
        *parents, name = path.split(".")
        holder = _field(document, ".".join(parents)) if parents else document["schema"][0]
        holder["properties"] = [p for p in holder["properties"] if p["name"] != name]
    return contract_from(document)


def handling(anonymise: object = None, expose: object = None) -> list[dict[str, Any]]:
    """A field's ``customProperties`` stating ``anonymise`` and ``exposeInSql`` (when given)."""
    items = [] if anonymise is None else [{"property": "anonymise", "value": anonymise}]
    return items + ([] if expose is None else [{"property": "exposeInSql", "value": expose}])
