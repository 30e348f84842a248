"""Several uvicorn processes on one port, each on a socket of its own (the collector's and
serving's servers).

:func:`run_workers` starts ``count`` processes (``spawn``), each calling
``target(*args)``; the target builds its uvicorn server and runs it on
:func:`reuse_port_socket`. With ``SO_REUSEPORT`` the kernel spreads new
connections evenly across the workers by their addresses. On one shared
socket (uvicorn's own ``workers=``), the worker that went idle last accepts
the next connection, and keep-alive connections opened together all land on
one worker while the others idle.

- **Ready only when every worker listens**: a worker's socket joins the port
  when its uvicorn server listens, after the app's start-up; one that answers
  while another still starts would be given every connection opened then, and
  keep-alive clients stay where they landed. :func:`worker_server` marks a
  worker listening, and :func:`listening_workers` says how many of the
  service's workers do, for the health answer to hold back until all of them
  listen (measured: a benchmark that began at the first worker's health gave
  one worker 3,277 requests and the other 134).
- **Metrics**: ``PROMETHEUS_MULTIPROC_DIR`` is set to a directory of this
  run before the workers start, so prometheus_client writes every worker's
  values to files there and whichever worker a scrape reaches can sum them
  (:func:`multiprocess_dir`); the directory is removed at exit.
- **A worker that dies takes the service down**: the others are stopped and
  the process exits non-zero, so the supervisor (platformctl, systemd, the
  container runtime) restarts it whole and the log says why.
- **SIGTERM / SIGINT** are passed to every worker, which stops accepting,
  finishes its requests and runs its shutdown (the collector flushes its
  producer there); the parent waits up to ``grace_s`` for each.
- **A worker whose parent is gone stops itself** (SIGTERM to itself, so the
  same shutdown runs): a parent killed alone (``kill -9`` of its pid, not of
  its group) would otherwise leave workers holding the port with no
  supervisor, beside the ones its restart starts.

Only the collector and serving use this (uvicorn is theirs).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from typing import Any

__all__ = [
    "MULTIPROC_ENV",
    "listening_workers",
    "multiprocess_dir",
    "reuse_port_socket",
    "run_workers",
    "worker_server",
]

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def multiprocess_dir() -> str | None:
    """The directory the workers of this service write their metrics to, or None when this
    process serves alone (its own registry is then the service's)."""
    return os.environ.get(MULTIPROC_ENV)


_COUNT_FILE = "workers"
_LISTENING = "listening-"


def listening_workers() -> tuple[int, int] | None:
    """(workers listening on the port, workers the service runs), or None when this process
    serves alone."""
    directory = multiprocess_dir()
    if directory is None:
        return None
    try:
        names = os.listdir(directory)
        with open(os.path.join(directory, _COUNT_FILE)) as count:
            expected = int(count.read())
    except (OSError, ValueError):  # the run's directory is gone: the service is stopping
        return (0, 1)
    return (sum(1 for name in names if name.startswith(_LISTENING)), expected)


def worker_server(config: Any) -> Any:
    """A ``uvicorn.Server`` for ``config`` that, once its sockets listen (after the app's
    start-up), counts itself among its service's listening workers."""
    import uvicorn

    class WorkerServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            directory = multiprocess_dir()
            if self.started and directory is not None:
                with open(os.path.join(directory, f"{_LISTENING}{os.getpid()}"), "w"):
                    pass

    return WorkerServer(config)


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` with ``SO_REUSEPORT``, for ``uvicorn.Server.run(sockets=)``:
    every worker binds one, and the kernel balances connections across them."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def run_workers(
    target: Callable[..., None], args: tuple[Any, ...], count: int, *, name: str, grace_s: float
) -> None:
    """Run ``target(*args)`` in ``count`` processes until one exits or a signal stops them.

    ``target`` must be importable by name (a module-level function): the workers are
    spawned, not forked, so none inherits the parent's threads or Kafka clients. Raises
    ``SystemExit`` naming the exit code when a worker failed.
    """
    if count < 1:
        raise ValueError(f"A service runs at least one worker, got {count}.")
    import multiprocessing
    import multiprocessing.connection
    import shutil
    import signal
    import tempfile

    metrics_dir = tempfile.mkdtemp(prefix=f"wap-{name}-metrics-")
    os.environ[MULTIPROC_ENV] = metrics_dir  # inherited by the spawned workers
    with open(os.path.join(metrics_dir, _COUNT_FILE), "w") as expected:
        expected.write(str(count))
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_worker, args=(target, args), name=f"{name}-worker-{i}")
        for i in range(count)
    ]
    try:
        for worker in workers:
            worker.start()

        def stop(*_: Any) -> None:
            for worker in workers:
                if worker.is_alive():
                    worker.terminate()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        multiprocessing.connection.wait([w.sentinel for w in workers if w.sentinel is not None])
        stop()  # one exited (it failed, or a signal reached it first): stop the others
        for worker in workers:
            worker.join(grace_s)
            if worker.is_alive():  # past its grace: what it holds is lost either way
                worker.kill()
                worker.join(5)
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        os.environ.pop(MULTIPROC_ENV, None)
    failed = [w.exitcode for w in workers if w.exitcode not in (0, -signal.SIGTERM)]
    if failed:
        raise SystemExit(f"a {name} worker exited with {failed[0]}; see the log above")


def _worker(target: Callable[..., None], args: tuple[Any, ...]) -> None:
    """One worker: ``target(*args)``; an interrupt (Ctrl-C reaches the whole process group,
    and uvicorn raises it again once it has shut down) ends it as a stop, not a failure."""
    _stop_when_orphaned()
    with contextlib.suppress(KeyboardInterrupt):
        target(*args)


def _stop_when_orphaned(poll_s: float = 1.0) -> None:
    """SIGTERM this process once its parent is gone (a watching daemon thread)."""
    import signal
    import threading
    import time

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
