"""``python -m serving.connect [--instance DIR]``: run the SQL server until SIGTERM."""

from __future__ import annotations

import argparse
import signal
import threading

from core.log import configure_logging, get_logger, log_event
from core.settings import load_settings

_log = get_logger("serving.connect")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.connect", description=__doc__)
    parser.add_argument("--instance", help="this server's state folder (marks its process)")
    parser.parse_args(argv)
    configure_logging()
    settings = load_settings()

    from serving.connect.host import SqlServer, serve_health, start_spark

    spark = start_spark(settings)
    server = SqlServer(settings, spark)
    http = serve_health(server)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log_event(_log, "sql.started", url=f"sc://{settings.sql.host}:{settings.sql.port}")
    try:
        server.run(stop)
    finally:
        http.shutdown()
        spark.stop()
        log_event(_log, "sql.stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
