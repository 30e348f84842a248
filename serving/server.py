"""Running the serving API: uvicorn processes, one socket each.

``python -m serving serve`` calls :func:`serve`. Every worker builds its app
with :func:`serving.__main__.app_factory` (settings from ``WAP_*``), its own
Cassandra session and its own caches.
"""

from __future__ import annotations

from typing import Any

import uvicorn

from core.settings import Settings

__all__ = ["serve", "server_config"]


def serve(settings: Settings) -> None:
    """Run ``settings.serving.workers`` uvicorn processes on the port.

    With several workers, each binds its own socket with ``SO_REUSEPORT``
    (:mod:`core.workers`): on one shared socket, a dashboard's keep-alive
    connections opened together all landed on one worker while the others idled
    (measured: 67% and 7% of a core at 2,000 requests/s); ``/health`` answers 503
    ``starting`` until every worker listens, for the same reason.
    """
    import socket

    if settings.serving.workers == 1 or not hasattr(socket, "SO_REUSEPORT"):
        _serve_one(settings, False)
        return
    from core.workers import run_workers

    run_workers(_serve_one, (settings, True), settings.serving.workers, name="serving", grace_s=15)


def server_config(settings: Settings, app: Any = None) -> uvicorn.Config:
    """One serving process's HTTP server: uvloop and httptools, a connection closed when its
    headers take longer than ``serving.header_timeout_s`` or after
    ``serving.requests_per_connection`` requests, an idle one kept ``serving.keep_alive_s``.

    ``app``: the ASGI app to serve; by default each process builds its own from the
    environment (:func:`serving.__main__.app_factory`)."""
    from core.http_server import http_protocol

    return uvicorn.Config(
        app if app is not None else "serving.__main__:app_factory",
        factory=app is None,
        host=settings.serving.host,
        port=settings.serving.port,
        loop="uvloop",
        http=http_protocol(
            settings.serving.header_timeout_s,
            "httptools",
            requests_per_connection=settings.serving.requests_per_connection,
        ),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
        timeout_keep_alive=settings.serving.keep_alive_s,
    )


def _serve_one(settings: Settings, reuse_port: bool) -> None:
    """One uvicorn process; ``reuse_port``: on a socket of its own (``SO_REUSEPORT``)."""
    from core.workers import reuse_port_socket, worker_server

    if not reuse_port:
        uvicorn.Server(server_config(settings)).run()
        return
    server = worker_server(server_config(settings))
    server.run(sockets=[reuse_port_socket(settings.serving.host, settings.serving.port)])
