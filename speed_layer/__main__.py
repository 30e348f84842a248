"""``python -m speed_layer``: run the speed layer until SIGTERM, or ``--drain`` to catch up."""

from __future__ import annotations

import argparse
import signal
import threading

from core.log import configure_logging, get_logger, log_event
from core.settings import load_settings
from core.spark import build_spark_session
from speed_layer.job import ProgressRecorder, create_tables, start_queries

_log = get_logger("speed_layer")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speed_layer", description=__doc__)
    parser.add_argument("--instance", default="speed", help="a name for logs and pid checks")
    parser.add_argument(
        "--drain",
        action="store_true",
        help="process what is in the log now, then stop (availableNow)",
    )
    args = parser.parse_args(argv)
    configure_logging()
    settings = load_settings()
    create_tables(settings)
    spark = build_spark_session(settings, app_name="speed-layer")
    recorder = ProgressRecorder(settings)
    spark.streams.addListener(recorder.listener())
    queries = start_queries(spark, settings, available_now=args.drain)

    stopping = threading.Event()

    def stop(signum: int, _frame: object) -> None:
        log_event(_log, "speed.stopping", signal=signum)
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    failed = None
    while not stopping.is_set():
        if all(not q.isActive for q in queries):
            break
        for query in queries:
            if not query.isActive and query.exception() is not None:
                failed = query
        if failed is not None:
            break
        stopping.wait(1.0)
    for query in queries:
        if query.isActive:
            query.stop()  # graceful: the current micro-batch finishes, the checkpoint commits
    recorder.close()
    spark.stop()
    if failed is not None:
        log_event(_log, "speed.failed", query=failed.name, error=str(failed.exception()))
        return 1
    log_event(_log, "speed.stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
