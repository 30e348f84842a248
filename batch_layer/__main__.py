"""``python -m batch_layer STEP``: one step of a batch pipeline (what each DAG task runs).

Steps, in pipeline order: ``bronze``, ``silver``, ``check_silver``, ``gold``,
``check_gold``, ``publish``, then ``reconcile`` (the published batch rows
against the speed rows, :mod:`batch_layer.reconcile`); ``all`` runs them in
that order. Maintenance: ``optimize``, ``vacuum``, ``drop_superseded``.
``forget --user ID`` erases a
user from the lake (:mod:`batch_layer.forget`); ``check_silver``, ``gold``,
``check_gold`` and ``publish`` then republish the days it names
(:data:`FORGET_STEPS`). Each step finds its work in the
pipeline ledger, so any step can be rerun alone; ``--dates`` makes ``silver``
reprocess those days from bronze (a backfill), and the steps after it pick
them up. The last line on stdout is a JSON summary; the exit code is 0 on
success, 3 when a quality gate failed, 4 when the speed and batch views
disagree beyond the threshold (the report goes to stderr first), 1 on any
other error.

This file is also the application the DAGs hand to ``spark-submit`` on a cluster;
``python -m batch_layer serve`` runs the step server the local DAGs submit to
(:mod:`batch_layer.server`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, is_dataclass
from datetime import date, timedelta
from typing import Any

from core.log import configure_logging, get_logger, log_event
from pipelines import PIPELINES, pipeline

PIPELINE_STEPS = ("bronze", "silver", "check_silver", "gold", "check_gold", "publish")
RECONCILE_STEP = "reconcile"
"""After a publish: the published batch rows against the speed rows still held."""
ALL_STEPS = (*PIPELINE_STEPS, RECONCILE_STEP)
MAINTENANCE_STEPS = ("optimize", "vacuum", "drop_superseded")
FORGET_STEPS = ("forget", "check_silver", "gold", "check_gold", "publish")
"""Forgetting a user, then the gated path that republishes the days it touched."""
EXIT_GATE_FAILED = 3
EXIT_DRIFT = 4

_log = get_logger("batch_layer")


def parse_dates(text: str) -> list[date]:
    """``2024-01-01``, ``2024-01-01,2024-01-05`` or an inclusive range ``2024-01-01..2024-01-03``.

    >>> [d.day for d in parse_dates("2024-01-30..2024-02-01")]
    [30, 31, 1]
    >>> parse_dates("2024-01-03..2024-01-01")
    Traceback (most recent call last):
    ...
    ValueError: Date range 2024-01-03..2024-01-01 ends before it starts.
    """
    days: list[date] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        if ".." in part:
            first, last = (date.fromisoformat(x.strip()) for x in part.split("..", 1))
            if last < first:
                raise ValueError(f"Date range {part} ends before it starts.")
            days += [first + timedelta(days=n) for n in range((last - first).days + 1)]
        else:
            days.append(date.fromisoformat(part))
    if not days:
        raise ValueError(f"No dates in {text!r}.")
    return sorted(set(days))


def _dates_argument(text: str) -> list[date]:
    """``--dates`` for argparse, whose own message for a ValueError hides what was wrong."""
    try:
        return parse_dates(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{error} Give YYYY-MM-DD, a comma-separated list of them or a range FIRST..LAST."
        ) from None


def run_step(
    spark: Any,
    settings: Any,
    step: str,
    spec: Any,
    run_id: str,
    dates: Any,
    user: str | None = None,
    scope: str = "everywhere",
) -> Any:
    from batch_layer import gold, maintenance, publish, quality, silver
    from batch_layer.bronze import ingest_bronze

    if step == "forget":
        from batch_layer.forget import forget

        if not user:
            raise ValueError("The forget step needs the user to forget: --user ID.")
        return forget(spark, settings, spec, user, run_id, everywhere=scope == "everywhere")
    if step == "bronze":
        return ingest_bronze(spark, settings, spec)
    if step == "silver":
        return silver.build_silver(spark, settings, dates, spec=spec, run_id=run_id)
    if step == "check_silver":
        return quality.check_silver(spark, settings, spec, run_id)
    if step == "gold":
        return gold.build_gold(spark, settings, spec=spec, run_id=run_id)
    if step == "check_gold":
        return quality.check_gold(spark, settings, spec, run_id)
    if step == "publish":
        return publish.publish(spark, settings, spec, run_id)
    if step == RECONCILE_STEP:
        from batch_layer.reconcile import reconcile

        return reconcile(spark, settings, spec, run_id)
    if step == "optimize":
        return maintenance.optimize(spark, settings, spec)
    if step == "vacuum":
        return maintenance.vacuum(spark, settings, spec)
    if step == "drop_superseded":
        return maintenance.drop_superseded(settings, spec)
    raise ValueError(f"Unknown step {step!r}.")


def _plain(value: Any) -> Any:
    if hasattr(value, "report"):
        return value.report()
    if is_dataclass(value):
        return asdict(value)
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


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors raise :class:`ValueError` when ``raising``: the step
    server checks a request's arguments with it and answers 400, where the CLI exits."""

    raising = False

    def error(self, message: str):  # type: ignore[override]
        if self.raising:
            raise ValueError(message)
        super().error(message)


def step_parser(*, raising: bool = False) -> argparse.ArgumentParser:
    """The arguments of one step run, as the CLI and the step server take them."""
    parser = _Parser(prog="python -m batch_layer", description=__doc__)
    parser.raising = raising
    parser.add_argument("step", choices=(*ALL_STEPS, "all", *MAINTENANCE_STEPS, FORGET_STEPS[0]))
    parser.add_argument(
        "--pipeline",
        required=True,
        choices=[p.name for p in PIPELINES],
        help="the declared pipeline (pipelines/declared/) whose step to run",
    )
    parser.add_argument("--run-id", default=None, help="the DAG run id (default: a timestamp)")
    parser.add_argument(
        "--dates",
        type=_dates_argument,
        default=None,
        help="days silver reprocesses from bronze: 2024-01-01, 2024-01-01,2024-01-05 "
        "or 2024-01-01..2024-01-03",
    )
    parser.add_argument(
        "--user", default=None, help="forget: the userId or anonymousId whose data to erase"
    )
    parser.add_argument(
        "--scope",
        choices=("everywhere", "pipeline"),
        default="everywhere",
        help="forget: suppress the person in every pipeline, present and future (the "
        "default), or in this pipeline only; the lake's rows are erased in this pipeline",
    )
    return parser


def parse_step_args(argv: list[str], *, raising: bool = False) -> argparse.Namespace:
    """``argv`` checked: the step, the pipeline, the run id (a timestamp by default)..."""
    parser = step_parser(raising=raising)
    args = parser.parse_args(argv)
    if args.step == "forget" and not args.user:
        parser.error("forget needs --user ID (a userId or an anonymousId).")
    args.run_id = args.run_id or time.strftime("manual__%Y-%m-%dT%H:%M:%S")
    args.steps = ALL_STEPS if args.step == "all" else (args.step,)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # the long-running step server (batch_layer/server_http.py)
        from batch_layer.server_http import main as serve

        return serve(argv[1:])
    args = parse_step_args(argv)
    configure_logging()

    from core.settings import load_settings
    from core.spark import build_spark_session

    settings = load_settings()
    spec = pipeline(args.pipeline).validate()
    spark = build_spark_session(settings, app_name=f"batch-{spec.name}-{args.step}", lineage=True)
    try:
        summary, code = run_steps(
            spark, settings, args.steps, spec, args.run_id, args.dates, args.user, args.scope
        )
    finally:
        spark.stop()
    print(json.dumps(summary, default=str), flush=True)
    if settings.monitoring.pushgateway_url:
        from batch_layer.metrics import push

        state = "success" if code == 0 else "failed"
        push(settings.monitoring.pushgateway_url, spec.name, argv, state, code, summary)
    return code


if __name__ == "__main__":
    sys.exit(main())
