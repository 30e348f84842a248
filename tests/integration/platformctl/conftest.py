"""Helpers of the platform control's tests: a second platform's state beside the first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.settings import Settings


@pytest.fixture
def isolated_state(settings: Settings, tmp_path: Path) -> Path:
    """A state directory of its own, linking the installed jars (nothing downloaded twice)."""
    state = tmp_path / "state"
    (state / "jars").mkdir(parents=True)
    for component in ("kafka", "cassandra", "spark"):
        os.symlink(settings.local.state_dir / "jars" / component, state / "jars" / component)
    return state
