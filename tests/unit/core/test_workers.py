"""core.workers: sockets that share a port, and a service that stops whole."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from core.settings import PROJECT_ROOT
from core.workers import (
    MULTIPROC_ENV,
    listening_workers,
    reuse_port_socket,
    run_workers,
    worker_server,
)


def test_every_worker_binds_the_same_port() -> None:
    first = reuse_port_socket("127.0.0.1", 0)
    port = first.getsockname()[1]
    second = reuse_port_socket("127.0.0.1", port)
    try:
        assert second.getsockname() == ("127.0.0.1", port)
    finally:
        first.close()
        second.close()


def test_a_worker_counts_as_listening_once_its_socket_listens(tmp_path, monkeypatch) -> None:
    """Not while its app starts (its socket takes no connection yet), but once it listens:
    the health answers of a service hold back until every worker does."""
    import socket
    import threading

    import uvicorn

    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    assert listening_workers() is None  # a process serving alone
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    (tmp_path / "workers").write_text("2")  # as run_workers writes it
    sock = reuse_port_socket("127.0.0.1", 0)
    during_startup = []

    async def app(scope, receive, send) -> None:
        while (await receive())["type"] == "lifespan.startup":
            during_startup.append(
                (listening_workers(), sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
            )
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})

    server = worker_server(uvicorn.Config(app, lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert during_startup == [((0, 2), 0)]
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        assert listening_workers() == (1, 2)
    finally:
        server.should_exit = True
        thread.join(30)


def test_a_service_runs_at_least_one_worker() -> None:
    with pytest.raises(ValueError, match="at least one worker"):
        run_workers(print, (), 0, name="test", grace_s=1)


def _service(code: str) -> subprocess.Popen:
    """``run_workers`` in a process of its own (it takes over the signal handlers)."""
    return subprocess.Popen(
        [sys.executable, "-c", f"import sys, time\nfrom core.workers import run_workers\n{code}"],
        cwd=PROJECT_ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_worker_that_fails_takes_the_service_down_and_says_why() -> None:
    service = _service("run_workers(sys.exit, (3,), 2, name='demo', grace_s=5)")
    _, err = service.communicate(timeout=60)
    assert service.returncode == 1
    assert "a demo worker exited with 3" in err


def test_sigterm_stops_every_worker_and_the_service_ends_cleanly() -> None:
    service = _service(
        "import os\n"
        "run_workers(time.sleep, (120,), 2, name='demo', grace_s=5)\n"
        "print('left', os.environ.get('PROMETHEUS_MULTIPROC_DIR'), file=sys.stderr)"
    )
    time.sleep(3)  # the workers are spawned
    service.send_signal(signal.SIGTERM)
    _, err = service.communicate(timeout=60)
    assert service.returncode == 0, err
    assert "left None" in err  # the metrics directory of the run is gone with it


def test_workers_whose_parent_was_killed_alone_stop_themselves(tmp_path) -> None:
    """``kill -9`` of the service's pid (not its group): its workers do not serve on."""
    import os

    pids = tmp_path / "pids"
    record = f"open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')"
    work = f"import os, time\n{record}\ntime.sleep(120)"
    service = _service(f"run_workers(exec, ({work!r},), 2, name='demo', grace_s=5)")
    deadline = time.monotonic() + 60
    while len(pids.read_text().split() if pids.exists() else []) < 2:
        assert time.monotonic() < deadline and service.poll() is None, service.stderr.read()
        time.sleep(0.2)
    workers = [int(p) for p in pids.read_text().split()]
    service.kill()
    service.wait(10)

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.monotonic() + 60
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [pid for pid in workers if alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []
