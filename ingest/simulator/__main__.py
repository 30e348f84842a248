"""``python -m ingest.simulator``: generate a run, send it, write its ground truth.

Example::

    python -m ingest.simulator --url http://127.0.0.1:8088 --write-key KEY \\
        --events 10000 --rate 2000 --seed 7 --truth out.json --duplicate-rate 0.02

Without ``--url`` nothing is sent: the run is only generated (``--dump``
writes the messages as JSON lines, ``--truth`` the ground truth). The write
key may also come from ``WAP_SIMULATOR_WRITE_KEY``. A summary is printed on
stdout as one JSON object (the seed included); progress goes to stderr.

The seed fixes the run, its ``messageId`` values included. Without ``--seed``
a replay uses 7 (the same history every time), and a live run draws a new
one: live traffic is new traffic, and a second live run with the first one's
ids would send the same events again, which the batch layer keeps once and
the speed layer, past its watermark, counts again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ingest.simulator.config import DEFAULT_START, SimulatorConfig
from ingest.simulator.events import SimEvent
from ingest.simulator.generate import generate
from ingest.simulator.send import SendError, send
from ingest.simulator.truth import build_truth

__all__ = ["main"]

REPLAY_SEED = 7
"""The seed of a replay run given none."""


def run_seed(seed: int | None, time_mode: str) -> int:
    """The seed a run uses: the one given, else :data:`REPLAY_SEED` for a replay and a new
    one (from the clock) for a live run, whose events must be new.

    >>> run_seed(3, "live"), run_seed(None, "replay")
    (3, 7)
    >>> run_seed(None, "live") != run_seed(None, "live")
    True
    """
    if seed is not None:
        return seed
    return REPLAY_SEED if time_mode == "replay" else time.time_ns() % 2**62


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ingest.simulator",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    send_group = parser.add_argument_group("sending")
    send_group.add_argument("--url", help="collector base URL; omit to only generate")
    send_group.add_argument(
        "--write-key", help="source write key (default: $WAP_SIMULATOR_WRITE_KEY)"
    )
    send_group.add_argument(
        "--time-mode",
        choices=("replay", "live"),
        default="replay",
        help="replay: simulated timestamps; live: anchored at now",
    )
    send_group.add_argument("--max-retries", type=int, default=5)
    send_group.add_argument("--no-progress", action="store_true", help="no progress lines")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--events", type=int, help="distinct events to generate (default 10000)")
    size.add_argument("--duration", type=float, help="simulated seconds, instead of --events")
    run = parser.add_argument_group("run")
    run.add_argument(
        "--seed",
        type=int,
        help=f"default: {REPLAY_SEED} with --time-mode replay, a new one per live run",
    )
    run.add_argument("--rate", type=float, default=100.0, help="events per second")
    run.add_argument("--pages", type=int, default=200)
    run.add_argument("--users", type=int, default=1000)
    run.add_argument("--known-user-rate", type=float, default=0.3)
    run.add_argument("--batch-size", type=int, default=100)
    run.add_argument(
        "--start",
        type=datetime.fromisoformat,
        default=DEFAULT_START,
        help="simulated start time, ISO-8601 with zone (replay mode)",
    )
    faults = parser.add_argument_group("faults")
    faults.add_argument("--duplicate-rate", type=float, default=0.0)
    faults.add_argument("--late-rate", type=float, default=0.0)
    faults.add_argument("--late-by", type=float, default=600.0, help="seconds")
    faults.add_argument("--out-of-order-rate", type=float, default=0.0)
    faults.add_argument("--skewed-client-rate", type=float, default=0.0)
    faults.add_argument("--skew", type=float, default=3600.0, help="seconds")
    faults.add_argument("--invalid-rate", type=float, default=0.0)
    out = parser.add_argument_group("output")
    out.add_argument("--truth", type=Path, help="write the ground truth JSON here")
    out.add_argument("--dump", type=Path, help="write the messages as JSON lines here")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    events = args.events
    if events is None and args.duration is None:
        events = 10_000
    try:
        config = SimulatorConfig(
            seed=run_seed(args.seed, args.time_mode),
            pages=args.pages,
            users=args.users,
            known_user_rate=args.known_user_rate,
            events=events,
            duration_s=args.duration,
            rate=args.rate,
            start=args.start,
            batch_size=args.batch_size,
            duplicate_rate=args.duplicate_rate,
            late_rate=args.late_rate,
            late_by_s=args.late_by,
            out_of_order_rate=args.out_of_order_rate,
            skewed_client_rate=args.skewed_client_rate,
            skew_s=args.skew,
            invalid_rate=args.invalid_rate,
        )
    except ValueError as exc:
        parser.error(str(exc))
    messages = generate(config)
    summary: dict[str, object] = {"generated": len(messages), "seed": config.seed}
    status = 0
    if args.url:
        write_key = args.write_key or os.environ.get("WAP_SIMULATOR_WRITE_KEY")
        if not write_key:
            parser.error("--url needs --write-key (or WAP_SIMULATOR_WRITE_KEY)")
        try:
            report = send(
                messages,
                args.url,
                write_key,
                config.rate,
                config.batch_size,
                not args.no_progress,
                time_mode=args.time_mode,
                max_retries=args.max_retries,
            )
        except SendError as exc:
            print(f"simulator: {exc}", file=sys.stderr)
            report, status = exc.report, 1
        messages = list(report.events)
        summary |= {
            "sent": report.sent,
            "accepted": report.accepted,
            "rejected": report.rejected,
            "rejected_by_reason": report.rejected_by_reason,
            "requests": len(report.requests),
            "elapsed_s": round(report.elapsed_s, 3),
            "time_mode": args.time_mode,
        }
    _write_outputs(messages, args.truth, args.dump, summary)
    print(json.dumps(summary))
    return status


def _write_outputs(
    events: list[SimEvent], truth: Path | None, dump: Path | None, summary: dict[str, object]
) -> None:
    if truth is not None:
        ground = build_truth(events)
        truth.write_text(ground.to_json())
        summary |= {"truth": str(truth), "valid_events": ground.valid_events}
    if dump is not None:
        with dump.open("w") as handle:
            for event in events:
                handle.write(json.dumps(event.payload) + "\n")
        summary["dump"] = str(dump)


if __name__ == "__main__":
    sys.exit(main())
