"""Keeps the SQL server answering: ``python -m serving.connect --supervise``.

The local ``sql`` service runs this. It starts the server (``python -m
serving.connect``) as a child, asks its ``/health`` every
``sql.health_interval_s`` and restarts it:

- at once when it exits (an out-of-memory error ends its driver:
  ``-XX:+ExitOnOutOfMemoryError``, rather than leaving a driver that no
  longer answers);
- when ``/health`` fails ``sql.restart_after`` times in a row: it answers 503
  ``not_answering`` when ``SELECT 1`` over Spark Connect takes longer than
  ``sql.health_timeout_s``, or does not answer at all. Before the server first
  answers, ``local.start_timeout_s`` is its time to start. Before that restart,
  the driver is asked for a thread dump (SIGQUIT to the group's JVMs), which it
  writes to the log: what the driver was doing when it stopped answering.

The child runs in a process group of its own (its Spark driver JVM with it),
which is what a restart stops: SIGTERM, then SIGKILL. A child whose supervisor
is gone stops itself. In production the orchestrator's health check on
``/health`` does the same job (docs/operations.md).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import Settings

__all__ = ["Supervisor"]

_log = get_logger(__name__)
_STOP_GRACE_S = 15.0
_QUICK_EXIT_S = 60.0


class Supervisor:
    """Runs ``argv`` (the server) and restarts it when it exits or stops answering."""

    def __init__(self, settings: Settings, argv: Sequence[str], env: dict[str, str]) -> None:
        self.settings = settings
        self.argv = list(argv)
        self.env = env
        self.restarts = 0
        self.child: subprocess.Popen[bytes] | None = None

    def run(self, stop: threading.Event) -> int:
        """Supervise until ``stop``; then stop the server and return 0."""
        quick_exits = 0
        while not stop.is_set():
            began = time.monotonic()
            self.child = subprocess.Popen(self.argv, env=self.env, start_new_session=True)
            log_event(_log, "sql.supervisor.started", pid=self.child.pid, restarts=self.restarts)
            why = self._watch(self.child, stop)
            if why is not None and self.child.poll() is None:
                _dump_threads(self.child.pid)
            self._stop_child(self.child)
            if why is None:
                break
            self.restarts += 1
            log_event(_log, "sql.supervisor.restarting", level=30, why=why, pid=self.child.pid)
            quick_exits = quick_exits + 1 if time.monotonic() - began < _QUICK_EXIT_S else 0
            stop.wait(min(30.0, 2.0**quick_exits - 1))
        return 0

    def _watch(self, child: subprocess.Popen[bytes], stop: threading.Event) -> str | None:
        """Why the child must be restarted, or None once ``stop`` is set."""
        sql = self.settings.sql
        started = time.monotonic()
        answered, failures = False, 0
        while not stop.wait(sql.health_interval_s):
            code = child.poll()
            if code is not None:
                return f"the server exited with code {code}"
            status, detail = self._health()
            if status == 200:
                answered, failures = True, 0
                continue
            if not answered and time.monotonic() - started < self.settings.local.start_timeout_s:
                continue
            failures += 1
            if failures >= sql.restart_after:
                return f"/health failed {failures} times in a row: {detail}"
        return None

    def _health(self) -> tuple[int | None, str]:
        import httpx

        sql = self.settings.sql
        host = "127.0.0.1" if sql.host == "0.0.0.0" else sql.host
        try:
            answer = httpx.get(
                f"http://{host}:{sql.health_port}/health", timeout=sql.health_timeout_s + 5
            )
        except httpx.HTTPError as error:
            return None, f"no answer ({type(error).__name__})"
        try:
            body = answer.json()
        except ValueError:
            body = {}
        return answer.status_code, f"{answer.status_code} {body.get('status')}: {body.get('error')}"

    def _stop_child(self, child: subprocess.Popen[bytes]) -> None:
        """SIGTERM the child's process group, SIGKILL it after a grace period. SIGCONT follows
        SIGTERM (as systemd sends it): a stopped process acts on its SIGTERM only once it runs
        again, so a stopped driver would otherwise wait out the whole grace period."""
        for sig, wait_s in ((signal.SIGTERM, _STOP_GRACE_S), (signal.SIGKILL, _STOP_GRACE_S)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, sig)
                if sig == signal.SIGTERM:
                    os.killpg(child.pid, signal.SIGCONT)
            try:
                child.wait(wait_s)
                if sig == signal.SIGKILL or not _group_alive(child.pid):
                    return
            except subprocess.TimeoutExpired:
                continue


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True


def _dump_threads(group: int) -> None:
    """SIGQUIT to the JVMs of process group ``group``: each prints its threads to its stdout
    (the server's log) and goes on. Python processes are left alone (SIGQUIT ends them)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) != group:
                continue
            command = (stat.parent / "cmdline").read_bytes().split(b"\0", 1)[0]
        except (OSError, IndexError, ValueError):
            continue
        if Path(command.decode(errors="replace")).name == "java":
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGQUIT)
                log_event(_log, "sql.supervisor.thread_dump", pid=int(stat.parent.name))
    time.sleep(1.0)
