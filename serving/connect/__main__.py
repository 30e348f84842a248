"""``python -m serving.connect [--instance DIR] [--supervise]``: run the SQL server until SIGTERM.

With ``--supervise`` (the local ``sql`` service), run it as a child and restart it
when it exits or stops answering (:mod:`serving.connect.supervise`).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading

from core.log import configure_logging, get_logger, log_event
from core.settings import Settings, child_env, load_settings

_log = get_logger("serving.connect")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.connect", description=__doc__)
    parser.add_argument("--instance", help="this server's state folder (marks its process)")
    parser.add_argument(
        "--supervise",
        action="store_true",
        help="run the server as a child; restart it when it exits or stops answering",
    )
    parser.add_argument("--supervisor", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    configure_logging()
    settings = load_settings()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.supervise:
        from serving.connect.supervise import Supervisor

        child = [sys.executable, "-m", "serving.connect", "--supervisor", str(os.getpid())]
        if args.instance:
            child += ["--instance", args.instance]
        env = child_env(settings)
        return Supervisor(settings, child, env).run(stop)
    return _serve(settings, stop, args.supervisor)


def _serve(settings: Settings, stop: threading.Event, supervisor: int | None) -> int:
    import contextlib

    from serving.connect.access import SqlAccess
    from serving.connect.executors import cluster_master, lower_task_priority
    from serving.connect.health import serve_health
    from serving.connect.host import SqlServer, start_spark

    if supervisor is not None:
        _stop_without(supervisor, stop)
    spark = start_spark(settings)
    driver = getattr(spark.sparkContext._gateway, "proc", None)  # type: ignore[attr-defined]
    server = SqlServer(settings, spark)
    # Who may call: until this first push the guard answers every call UNAVAILABLE.
    jvm = spark._jvm  # type: ignore[attr-defined]
    readable = (*server.pipelines, *server.derived)  # every declaration a team may read
    server.access = SqlAccess(settings, jvm, readable).start(server.cassandra())
    if driver is not None:
        _stop_when_exited(driver, stop)
        if cluster_master(settings) is not None:
            nice = settings.sql.executor_nice
            lower_task_priority(driver.pid, nice, stop, lambda: server.refreshed is not None)
    http = serve_health(server)
    log_event(_log, "sql.started", url=f"sc://{settings.sql.host}:{settings.sql.port}")
    try:
        server.run(stop)
    finally:
        http.shutdown()
        with contextlib.suppress(Exception):  # the last audit records, before Spark stops
            server.access.stop()
        driver_gone = driver is not None and driver.poll() is not None
        if not driver_gone:
            with contextlib.suppress(Exception):
                spark.stop()
        log_event(_log, "sql.stopped", driver_exited=driver_gone)
    return 3 if driver_gone else 0


def _stop_when_exited(driver: subprocess.Popen[bytes], stop: threading.Event) -> None:
    """Set ``stop`` when the Spark driver's JVM (``driver``, a Popen) has exited: an
    out-of-memory error ends it, and this process then exits for a restart."""

    def watch() -> None:
        while not stop.wait(1.0):
            if driver.poll() is not None:
                log_event(_log, "sql.driver_exited", level=40, code=driver.returncode)
                stop.set()

    threading.Thread(target=watch, name="sql-driver-watch", daemon=True).start()


def _stop_without(supervisor: int, stop: threading.Event) -> None:
    """Set ``stop`` when the supervising process is gone (this process was orphaned)."""

    def watch() -> None:
        while not stop.wait(2.0):
            if os.getppid() != supervisor:
                log_event(_log, "sql.supervisor_gone", level=30, supervisor=supervisor)
                stop.set()

    threading.Thread(target=watch, name="sql-supervisor-watch", daemon=True).start()


if __name__ == "__main__":
    raise SystemExit(main())
