"""Which shared services a test run started, so the run (not a worker) stops them, and which
test runs are using them, so one run ending does not stop another's."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["STARTED_BY_TESTS", "TESTS_LOCK", "join_runs", "leave_runs"]

_STATE = Path(__file__).resolve().parents[2] / ".platform" / "state"

STARTED_BY_TESTS = _STATE / "started-by-tests"
"""The services a test run started (one name a line): stopped when the last run using them
ends, by the process that ran it, not by whichever parallel worker finished first."""

TESTS_LOCK = _STATE / "tests.lock"
"""Held while a worker starts or checks the shared services: only the first starts them."""

_RUNS = _STATE / "test-runs"
"""One file per test run in progress (its controlling process's pid)."""


def join_runs() -> None:
    """Record this run as using the shared services until :func:`leave_runs`."""
    _RUNS.mkdir(parents=True, exist_ok=True)
    (_RUNS / str(os.getpid())).touch()


def leave_runs() -> bool:
    """Forget this run; whether it was the last one (no other run's process is alive)."""
    (_RUNS / str(os.getpid())).unlink(missing_ok=True)
    others = []
    for entry in _RUNS.glob("*") if _RUNS.exists() else ():
        try:
            os.kill(int(entry.name), 0)
        except (ValueError, ProcessLookupError):
            entry.unlink(missing_ok=True)  # a run that ended without leaving (killed)
            continue
        except PermissionError:
            pass
        others.append(entry.name)
    return not others
