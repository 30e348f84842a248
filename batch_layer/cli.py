"""The command line of the batch layer: ``python -m batch_layer STEP`` runs one step (or
``all``) of a pipeline, what each DAG task runs; ``python -m batch_layer serve`` the
step server. The steps are :mod:`batch_layer.steps`' table.

Steps, in pipeline order: ``bronze``, ``silver``, ``check_silver``, ``gold``,
``check_gold``, ``publish``, then ``reconcile`` (the published batch rows
against the speed rows, :mod:`batch_layer.reconcile`); ``all`` runs them in
that order. Maintenance: ``optimize``, ``vacuum``, ``drop_superseded``.
``forget --user ID`` erases a
user from the lake (:mod:`batch_layer.forget`); ``check_silver``, ``gold``,
``check_gold`` and ``publish`` then republish the days it names
(:data:`batch_layer.steps.FORGET`). Each step finds its work in the
pipeline ledger, so any step can be rerun alone; ``--dates`` makes ``silver``
reprocess those days from bronze (a backfill), and the steps after it pick
them up. The last line on stdout is a JSON summary; the exit code is 0 on
success, 3 when a quality gate failed, 4 when the speed and batch views
disagree beyond the threshold (the report goes to stderr first), 1 on any
other error.

``batch_layer/__main__.py``, which calls :func:`main`, is the application the DAGs
hand to ``spark-submit`` on a cluster; ``python -m batch_layer serve`` runs the step
server the local DAGs submit to (:mod:`batch_layer.server`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import date, timedelta

from batch_layer.runner import run_steps
from batch_layer.steps import ALL, STEPS
from core.log import configure_logging
from pipelines import DERIVED, PIPELINES, declared_pipeline, validated

__all__ = ["main", "parse_dates", "parse_step_args", "step_parser"]


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
    parser.add_argument("step", choices=(*STEPS, "all"))
    parser.add_argument(
        "--pipeline",
        required=True,
        choices=[p.name for p in (*PIPELINES, *DERIVED)],
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
    if args.step != "all" and STEPS[args.step].person and not args.user:
        parser.error(f"{args.step} needs --user ID (a userId or an anonymousId).")
    kind = "derived" if args.pipeline in {d.name for d in DERIVED} else "pipeline"
    if kind not in (STEPS[args.step].kinds if args.step != "all" else ("pipeline",)):
        steps = [name for name, step in STEPS.items() if kind in step.kinds]
        parser.error(
            f"{args.pipeline} is a {'derived ' if kind == 'derived' else ''}pipeline: its steps "
            f"are {', '.join(steps)}, not {args.step}."
        )
    args.run_id = args.run_id or time.strftime("manual__%Y-%m-%dT%H:%M:%S")
    args.steps = ALL if args.step == "all" else (args.step,)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the steps ``argv`` names in this process; the exit code."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse_step_args(argv)
    configure_logging()

    from core.settings import load_settings
    from core.spark import build_spark_session

    settings = load_settings()
    spec = validated(declared_pipeline(args.pipeline))
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
