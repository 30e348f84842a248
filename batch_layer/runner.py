"""Runs batch steps in order for one pipeline: the sequencing and the exit codes.

What each step runs is its record in :mod:`batch_layer.steps`; the command line
(:mod:`batch_layer.cli`), the step server, ``platformctl forget`` and the benchmarks
call :func:`run_steps` (or :func:`run_step`). A failed quality gate ends the run with
:data:`EXIT_GATE_FAILED`, batch and speed views apart with :data:`EXIT_DRIFT` (its
report on stderr first).
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, is_dataclass
from typing import Any

from batch_layer.steps import STEPS, StepCall
from core.log import get_logger, log_event

__all__ = ["EXIT_DRIFT", "EXIT_GATE_FAILED", "run_step", "run_steps"]

EXIT_GATE_FAILED = 3
EXIT_DRIFT = 4

_log = get_logger("batch_layer")


def run_step(
    spark: Any,
    settings: Any,
    step: str,
    spec: Any,
    run_id: str,
    dates: Any = None,
    user: str | None = None,
    scope: str = "everywhere",
) -> Any:
    """One step's result (its report, or what its function returns)."""
    found = STEPS.get(step)
    if found is None:
        raise ValueError(f"Unknown step {step!r}; the steps are: {', '.join(STEPS)}.")
    return found.run(StepCall(spark, settings, spec, run_id, dates, user, scope))  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if hasattr(value, "report"):
        return value.report()
    if is_dataclass(value):
        return asdict(value)  # type: ignore[arg-type]
    return value


def run_steps(
    spark: Any,
    settings: Any,
    steps: tuple[str, ...],
    spec: Any,
    run_id: str,
    dates: Any = None,
    user: str | None = None,
    scope: str = "everywhere",
) -> tuple[dict[str, Any], int]:
    """Run ``steps`` in order; (the JSON summary, the exit code). Stops at a failed gate or
    when the views of the two layers disagree (the report goes to stderr)."""
    from batch_layer.quality import QualityGateFailed
    from batch_layer.reconcile import LayersDisagree

    summary: dict[str, Any] = {"pipeline": spec.name, "run_id": run_id, "steps": {}}
    try:
        for step in steps:
            started = time.monotonic()
            log_event(_log, "batch.step_started", step=step, pipeline=spec.name, run_id=run_id)
            result = run_step(spark, settings, step, spec, run_id, dates, user, scope)
            seconds = round(time.monotonic() - started, 2)
            summary["steps"][step] = {"seconds": seconds, "result": _plain(result)}
            log_event(_log, "batch.step_done", step=step, seconds=seconds)
    except QualityGateFailed as failed:
        log_event(_log, "batch.gate_failed", error=str(failed))
        summary["failed"] = str(failed)
        return summary, EXIT_GATE_FAILED
    except LayersDisagree as drift:
        print(str(drift), file=sys.stderr, flush=True)
        summary["failed"] = str(drift).split("\n", 1)[0]
        return summary, EXIT_DRIFT
    return summary, 0
