"""Running the serving API: uvicorn processes, one socket each.

``python -m serving serve`` calls :func:`serve`. Every worker builds its app
with :func:`serving.__main__.app_factory` (settings from ``WAP_*``), its own
Cassandra session and its own caches.
"""

from __future__ import annotations

from core.settings import Settings

__all__ = ["serve"]


def serve(settings: Settings) -> None:
    """Run ``settings.serving.workers`` uvicorn processes on the port.

    With several workers, each binds its own socket with ``SO_REUSEPORT``
    (:mod:`core.workers`): on one shared socket, a dashboard's keep-alive
    connections opened together all landed on one worker while the others idled
    (measured: 67% and 7% of a core at 2,000 requests/s).
    """
    import socket

    if settings.serving.workers == 1 or not hasattr(socket, "SO_REUSEPORT"):
        _serve_one(settings, False)
        return
    from core.workers import run_workers

    run_workers(_serve_one, (settings, True), settings.serving.workers, name="serving", grace_s=15)


def _serve_one(settings: Settings, reuse_port: bool) -> None:
    """One uvicorn process; ``reuse_port``: on a socket of its own (``SO_REUSEPORT``)."""
    import uvicorn

    from core.http_server import http_protocol
    from core.workers import reuse_port_socket

    config = uvicorn.Config(
        "serving.__main__:app_factory",
        factory=True,
        host=settings.serving.host,
        port=settings.serving.port,
        loop="uvloop",
        # httptools, closing a connection whose headers take longer than the setting, and
        # one that made its requests_per_connection.
        http=http_protocol(
            settings.serving.header_timeout_s,
            "httptools",
            requests_per_connection=settings.serving.requests_per_connection,
        ),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    if not reuse_port:
        server.run()
        return
    server.run(sockets=[reuse_port_socket(settings.serving.host, settings.serving.port)])
