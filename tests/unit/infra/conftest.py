"""Parsed Terraform of infra/terraform, shared by the infra tests.

python-hcl2 keeps HCL string literals with their quotes (``'"eu-west-1"'``)
and wraps expressions as ``"${...}"``; :func:`unquote` undoes the former so
tests compare plain values.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import hcl2
import pytest

TERRAFORM_ROOT = Path(__file__).resolve().parents[3] / "infra" / "terraform"


def _unquote(value: Any) -> Any:
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _parse(path: Path) -> dict[str, Any]:
    with path.open() as handle:
        return hcl2.load(handle)


@pytest.fixture(scope="session")
def terraform_root() -> Path:
    return TERRAFORM_ROOT


@pytest.fixture(scope="session")
def unquote() -> Callable[[Any], Any]:
    return _unquote


@pytest.fixture(scope="session")
def tf_files() -> list[Path]:
    return sorted(TERRAFORM_ROOT.rglob("*.tf"))


@pytest.fixture(scope="session")
def parse_dir() -> Callable[[Path], dict[str, list[Any]]]:
    """Parse every ``.tf`` of one directory into one dict of block type -> blocks."""

    def parse(directory: Path) -> dict[str, list[Any]]:
        merged: dict[str, list[Any]] = {}
        for path in sorted(directory.glob("*.tf")):
            for block_type, blocks in _parse(path).items():
                merged.setdefault(block_type, []).extend(blocks)
        return merged

    return parse


@pytest.fixture(scope="session")
def labelled() -> Callable[[list[dict[str, Any]]], dict[str, dict[str, Any]]]:
    """``[{'"name"': body}, ...]`` (variable, output, module blocks) as name -> body."""

    def flatten(blocks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
        return {_unquote(name): body for block in blocks for name, body in block.items()}

    return flatten


@pytest.fixture(scope="session")
def module_dirs() -> list[Path]:
    return sorted(path for path in (TERRAFORM_ROOT / "modules").iterdir() if path.is_dir())


@pytest.fixture(scope="session")
def env_dirs() -> list[Path]:
    return sorted(path for path in (TERRAFORM_ROOT / "envs").iterdir() if path.is_dir())
