"""``python -m ingest``: run the collector (``collector.workers`` uvicorn processes, one
Kafka producer each: ``ingest/server.py``) with settings from WAP_* variables.

``python -m ingest replay-dead-letters --reason R [--reason R2] --since T
[--until T2] [--dry-run]`` routes the matching dead letters again with the
current contract and settings (``ingest/replay.py``); it prints its counts as
JSON on stdout, logs progress on stderr and exits 2 on bad arguments or a
missing topic, 1 when Kafka fails mid-way.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from core.log import configure_logging
from core.settings import load_settings

REPLAY = "replay-dead-letters"


def _moment(text: str) -> datetime:
    """An ISO-8601 date-time; without an offset it is UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO-8601 date-time such as 2026-11-23T08:00:00Z"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _parser() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    parser = argparse.ArgumentParser(prog="python -m ingest", description=__doc__)
    parser.add_argument(
        "--instance", default="collector", help="a name for this process in logs and pid checks"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    replay = commands.add_parser(
        REPLAY,
        help="route dead letters again after a fix (default command: run the collector)",
        description="Route the matching dead letters again with the current contract and "
        "settings; the events now valid go to the events topic, once.",
    )
    replay.add_argument(
        "--reason",
        action="append",
        required=True,
        metavar="R",
        help="a reason to replay: exact (invalid:timestamp_too_old, too_large), a family "
        "(invalid:) or a prefix (invalid:time*); repeat for more",
    )
    replay.add_argument(
        "--since", required=True, type=_moment, metavar="T", help="letters written from T on"
    )
    replay.add_argument(
        "--until", type=_moment, metavar="T2", help="letters written before T2 (default: now)"
    )
    replay.add_argument(
        "--dry-run", action="store_true", help="count what would be replayed; write nothing"
    )
    return parser, replay


def main(argv: list[str] | None = None) -> int:
    parser, replay = _parser()
    args = parser.parse_args(argv)
    if args.command == REPLAY:
        return _replay(replay, args)
    from ingest.server import serve

    configure_logging()
    serve(load_settings())
    return 0


def _replay(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from ingest.replay import ReasonFilter, ReplayRequest
    from ingest.replay_kafka import ReplayFailed, ReplayRefused, run_replay

    try:
        request = ReplayRequest(
            ReasonFilter.parse(args.reason), args.since, args.until, args.dry_run
        )
    except ValueError as exc:
        parser.error(str(exc))  # exits 2
    configure_logging()
    try:
        report = run_replay(load_settings(), request)
    except ReplayRefused as exc:
        parser.error(str(exc))
    except ReplayFailed as exc:
        parser.exit(1, f"{parser.prog}: failed: {exc}\n")
    print(json.dumps(report.as_dict()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
