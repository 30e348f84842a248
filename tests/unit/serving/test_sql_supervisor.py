"""The SQL server's supervisor restarts a server that exits or stops answering.

The supervised "servers" here are small real processes: one that exits at once,
and one whose ``/health`` answers 503 (as the server does when ``SELECT 1``
does not answer in time).
"""

from __future__ import annotations

import os
import sys
import threading
import time

from core.settings import LocalSettings, Settings, SqlSettings
from serving.connect.supervise import Supervisor
from tests.support.ports import free_port

NOT_ANSWERING = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503); self.end_headers(); self.wfile.write(b'{"status": "no"}')
    def log_message(self, *a): pass
print("serving", flush=True)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _settings(port: int) -> Settings:
    return Settings(
        sql=SqlSettings(
            health_port=port, health_interval_s=0.2, health_timeout_s=1, restart_after=2
        ),
        local=LocalSettings(start_timeout_s=0.5),
    )


def _supervise(supervisor: Supervisor, until, timeout_s: float = 30) -> None:
    stop = threading.Event()
    thread = threading.Thread(target=supervisor.run, args=(stop,), daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not until() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the supervisor did not stop"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_server_that_exits_is_started_again():
    argv = [sys.executable, "-c", "raise SystemExit(3)"]
    supervisor = Supervisor(_settings(free_port()), argv, dict(os.environ))
    _supervise(supervisor, lambda: supervisor.restarts >= 2)
    assert supervisor.restarts >= 2


def test_a_server_that_stops_answering_is_stopped_and_started_again():
    port = free_port()
    argv = [sys.executable, "-c", NOT_ANSWERING, str(port)]
    supervisor = Supervisor(_settings(port), argv, dict(os.environ))
    first: list[int] = []

    def restarted() -> bool:
        if not first and supervisor.child is not None:
            first.append(supervisor.child.pid)
        return supervisor.restarts >= 1 and supervisor.child.pid != first[0]

    _supervise(supervisor, restarted)
    assert supervisor.restarts >= 1
    assert not _alive(first[0]), "the server that stopped answering was left running"
    assert supervisor.child.poll() is not None, "the last server outlived its supervisor"


SLEEPER = """
public class Sleeper {
  public static void main(String[] args) throws Exception {
    java.nio.file.Files.writeString(java.nio.file.Path.of(args[0]), "up");
    Thread.sleep(600_000);
  }
}
"""

DRIVER_THEN_NOT_ANSWERING = """
import http.server, os, subprocess, sys
port, source, ready = int(sys.argv[1]), sys.argv[2], sys.argv[3]
subprocess.Popen(["java", source, ready])
answered = []
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        # 503 until the JVM runs its main (its SIGQUIT handler is in place), then one 200
        # (the server has answered once), then 503 for good.
        ok = os.path.exists(ready) and not answered
        if ok:
            answered.append(1)
        self.send_response(200 if ok else 503); self.end_headers(); self.wfile.write(b"{}")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def test_before_a_restart_the_driver_s_threads_are_dumped_to_the_log(tmp_path, capfd):
    """The server's JVM (here a sleeping one in the server's process group) prints its
    threads when the supervisor gives up on it: the log says what the driver was doing."""
    source = tmp_path / "Sleeper.java"
    source.write_text(SLEEPER)
    port = free_port()
    settings = _settings(port).model_copy(update={"local": LocalSettings(start_timeout_s=120.0)})
    argv = [sys.executable, "-c", DRIVER_THEN_NOT_ANSWERING, str(port), str(source)]
    supervisor = Supervisor(settings, [*argv, str(tmp_path / "ready")], dict(os.environ))
    _supervise(supervisor, lambda: supervisor.restarts >= 1, timeout_s=120)
    out = capfd.readouterr().out
    assert supervisor.restarts >= 1
    assert "Full thread dump" in out and '"main"' in out, out[-2000:]


def test_a_stopped_server_is_ended_by_its_sigterm_not_by_the_grace_period():
    """SIGSTOP (a driver that holds its port and answers nothing): the SIGTERM that stops it
    takes effect because SIGCONT follows, so no SIGKILL is needed."""
    import signal
    import subprocess

    ended = "import signal, sys, time\n" + (
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", ended], start_new_session=True, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout.readline() == b"ready\n"
        os.kill(child.pid, signal.SIGSTOP)
        Supervisor(_settings(free_port()), [], {})._stop_child(child)
        assert child.returncode == 7  # its own SIGTERM handler ran: not killed
    finally:
        if child.poll() is None:
            child.kill()
