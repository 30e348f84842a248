"""Running the collector: uvicorn processes on one port, one Kafka producer each.

``python -m ingest`` calls :func:`serve`. With ``collector.workers`` above one,
each worker is a process of its own (:mod:`core.workers`) on a socket of its
own (``SO_REUSEPORT``), with its own app, producer and suppression list; the
metrics are summed over the workers (:mod:`ingest.metrics`), and ``/health``
answers 200 only once every worker listens. A worker answers
200 only after Kafka acknowledged its request's records, as one process does;
on SIGTERM every worker finishes its requests and flushes its producer before
it exits, and a worker that dies takes the service down.
"""

from __future__ import annotations

import uvicorn

from core.http_server import http_protocol
from core.settings import Settings

__all__ = ["serve", "server_config"]

SHUTDOWN_GRACE_S = 30
"""How long a stopping worker lets its requests finish (then its producer gets as long to
flush what is queued)."""


def server_config(settings: Settings) -> uvicorn.Config:
    """The collector's HTTP server: its app, address and connection limits (a connection
    whose request headers take longer than ``collector.header_timeout_s`` is closed, and one
    after ``collector.requests_per_connection`` requests)."""
    from ingest.app import create_app

    return uvicorn.Config(
        create_app(settings),
        host=settings.collector.host,
        port=settings.collector.port,
        http=http_protocol(
            settings.collector.header_timeout_s,
            requests_per_connection=settings.collector.requests_per_connection,
        ),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        timeout_keep_alive=settings.collector.keep_alive_s,
    )


def serve(settings: Settings) -> None:
    """Run ``settings.collector.workers`` collector processes on the port until stopped."""
    import socket

    if settings.collector.workers == 1 or not hasattr(socket, "SO_REUSEPORT"):
        uvicorn.Server(server_config(settings)).run()
        return
    from core.workers import run_workers

    # A worker's stop: its requests (SHUTDOWN_GRACE_S), then its producer's flush (as long).
    grace = 2 * SHUTDOWN_GRACE_S + 5
    run_workers(
        _serve_worker, (settings,), settings.collector.workers, name="collector", grace_s=grace
    )


def _serve_worker(settings: Settings) -> None:
    """One worker process: the collector on a socket of its own."""
    from core.log import configure_logging
    from core.workers import reuse_port_socket, worker_server

    configure_logging()
    sock = reuse_port_socket(settings.collector.host, settings.collector.port)
    worker_server(server_config(settings)).run(sockets=[sock])
