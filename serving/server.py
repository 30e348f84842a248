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

    With several workers, each binds its own socket with ``SO_REUSEPORT``, so the
    kernel spreads connections evenly across them by their addresses. On one shared
    socket (uvicorn's own ``workers=``), the worker that went idle last accepts the
    next connection, and a dashboard's keep-alive connections opened together all
    land on one worker while the others idle (measured: 67% and 7% of a core at 2,000
    requests/s).
    """
    import socket

    if settings.serving.workers == 1 or not hasattr(socket, "SO_REUSEPORT"):
        _serve_one(settings, None)
        return
    import multiprocessing
    import multiprocessing.connection
    import os
    import shutil
    import signal
    import tempfile

    # The workers' request metrics, summed by whichever worker a scrape reaches.
    metrics_dir = tempfile.mkdtemp(prefix="wap-serving-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir

    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_serve_one, args=(settings, True), name=f"serving-worker-{i}")
        for i in range(settings.serving.workers)
    ]
    for worker in workers:
        worker.start()

    def stop(*_):
        for worker in workers:
            if worker.is_alive():
                worker.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # A worker that dies takes the service down: the supervisor (platformctl, systemd,
    # the container runtime) restarts it whole and sees why in the log.
    multiprocessing.connection.wait([w.sentinel for w in workers])
    stop()
    for worker in workers:
        worker.join(15)
    shutil.rmtree(metrics_dir, ignore_errors=True)
    failed = [w.exitcode for w in workers if w.exitcode not in (0, -signal.SIGTERM)]
    if failed:
        raise SystemExit(f"a serving worker exited with {failed[0]}; see the log above")


def _serve_one(settings: Settings, reuse_port: bool | None) -> None:
    """One uvicorn process; ``reuse_port``: on a socket of its own (``SO_REUSEPORT``)."""
    import socket

    import uvicorn

    from core.http_server import header_timeout_protocol

    config = uvicorn.Config(
        "serving.__main__:app_factory",
        factory=True,
        host=settings.serving.host,
        port=settings.serving.port,
        loop="uvloop",
        # httptools, closing a connection whose headers take longer than the setting.
        http=header_timeout_protocol(settings.serving.header_timeout_s, "httptools"),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=10,
    )
    server = uvicorn.Server(config)
    if not reuse_port:
        server.run()
        return
    sock = socket.socket(socket.AF_INET6 if ":" in settings.serving.host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((settings.serving.host, settings.serving.port))
    sock.set_inheritable(True)
    server.run(sockets=[sock])
