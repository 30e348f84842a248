"""Which shared services a test run started, so the run (not a worker) stops them."""

from __future__ import annotations

from pathlib import Path

__all__ = ["STARTED_BY_TESTS", "TESTS_LOCK"]

_STATE = Path(__file__).resolve().parents[2] / ".platform" / "state"

STARTED_BY_TESTS = _STATE / "started-by-tests"
"""The services a test run started (one name a line): stopped when the whole run ends, by
the process that ran it, not by whichever parallel worker finished first."""

TESTS_LOCK = _STATE / "tests.lock"
"""Held while a worker starts or checks the shared services: only the first starts them."""
