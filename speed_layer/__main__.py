"""``python -m speed_layer``: run the speed layer until SIGTERM, ``--drain`` to catch up and stop,
or ``reset --from-offsets earliest|latest|TIMESTAMP`` to open a new run on fresh checkpoints."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from core.log import configure_logging, get_logger, log_event
from core.settings import load_settings

_log = get_logger("speed_layer")


class _Query(Protocol):
    name: str

    @property
    def isActive(self) -> bool: ...

    def exception(self) -> Any: ...


def supervise(queries: Sequence[_Query], stopping: threading.Event, poll_s: float = 1.0):
    """Wait until a stop is asked, every query ended, or one failed; return the failed ones.

    A query that ended with an exception is a failure even when every other
    query ended too (a Cassandra outage kills them all between two polls;
    ``--drain`` ends them all by design).
    """
    while True:
        failed = [q for q in queries if not q.isActive and q.exception() is not None]
        if failed or all(not q.isActive for q in queries) or stopping.is_set():
            return failed
        stopping.wait(poll_s)


def run(drain: bool) -> int:
    from core.cassandra import connect
    from core.spark import build_spark_session
    from layout import create_tables
    from speed_layer.job import ProgressRecorder, speed_sql_conf, start_queries
    from speed_layer.start import current_start
    from views import VIEWS

    settings = load_settings()
    create_tables(settings)
    cluster, session = connect(settings.cassandra)
    try:
        start = current_start(session, settings)
    finally:
        cluster.shutdown()
    log_event(
        _log,
        "speed.run",
        generation=start.generation,
        requested=start.requested,
        checkpoint=start.checkpoint_dir(settings),
        floor=start.floor.isoformat() if start.floor else None,
    )
    spark = build_spark_session(settings, app_name="speed-layer")
    for key, value in speed_sql_conf(settings).items():
        spark.conf.set(key, value)
    recorder = ProgressRecorder(settings, start.generation)
    spark.streams.addListener(recorder.listener())
    queries = start_queries(spark, settings, available_now=drain, start=start)

    stopping = threading.Event()

    def stop(signum: int, _frame: object) -> None:
        log_event(_log, "speed.stopping", signal=signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = supervise(queries, stopping)
    for query in queries:
        if query.isActive:
            query.stop()  # graceful: the current micro-batch finishes, the checkpoint commits
    if not recorder.wait_for(queries):
        log_event(_log, "speed.progress_not_recorded", queries=[q.name for q in queries])
    if failed:
        for query in failed:
            log_event(_log, "speed.failed", query=query.name, error=str(query.exception()))
    else:
        recorder.stopped([spec.name for spec in VIEWS])
    recorder.close()
    spark.stop()
    if failed:
        return 1
    log_event(_log, "speed.stopped")
    return 0


def reset_command(from_offsets: str, force: bool) -> int:
    from speed_layer.reset import ResetRefused, reset

    settings = load_settings()
    try:
        start = reset(settings, from_offsets, force=force)
    except (ResetRefused, ValueError) as exc:
        log_event(_log, "speed.reset_refused", error=str(exc))
        print(f"reset refused: {exc}")
        return 2
    floor = start.floor.isoformat() if start.floor else "none (every window is recomputed)"
    print(
        f"speed layer reset: run {start.generation} starts at {start.requested} "
        f"({start.starting_offsets}) on {start.checkpoint_dir(settings)}; it writes windows "
        f"from {floor}. Start the job (python -m platformctl up speed) to run it."
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    parser.add_argument("--instance", default="speed", help="a name for logs and pid checks")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="process what is in the log now, then stop (availableNow)",
    )
    commands = parser.add_subparsers(dest="command")
    reset = commands.add_parser(
        "reset",
        help="open a new run on fresh checkpoints (stop the job first); see docs/operations.md",
    )
    reset.add_argument(
        "--from-offsets",
        required=True,
        metavar="earliest|latest|TIMESTAMP",
        help="where the new run starts reading the log (TIMESTAMP: ISO-8601, e.g. "
        "2026-11-23T08:00:00Z)",
    )
    reset.add_argument("--force", action="store_true", help="reset even though the job looks alive")
    args = parser.parse_args(argv)
    configure_logging()
    if args.command == "reset":
        return reset_command(args.from_offsets, args.force)
    return run(args.drain)


if __name__ == "__main__":
    raise SystemExit(main())
