"""Start, find and stop the platform's local processes by pid file.

A process is *ours* only if its pid file names a live process whose command
line still contains the marker we started it with (the service's config
path), or the title the program gave itself since (setproctitle). So a stale
pid file never blocks a start, a recycled pid is never killed, and ``down``
stops exactly what ``up`` started.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "ManagedProcess",
    "ServiceStartError",
    "log_tail",
    "port_open",
]


class ServiceStartError(RuntimeError):
    """A service did not become healthy; the message carries its log tail."""


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, or a note that it does not exist."""
    if not path.exists():
        return f"(no log at {path})"
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        handle.seek(max(0, handle.tell() - 64 * 1024))
        text = handle.read().decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


@dataclass(frozen=True)
class ManagedProcess:
    """One long-lived local process the platform control owns."""

    name: str
    argv: Sequence[str]
    pid_file: Path
    log_file: Path
    marker: str
    """A string in the command line that proves the pid is still ours."""
    title: str | None = None
    """The process title the program sets for itself once running (setproctitle replaces the
    command line, marker included); also proves the pid is ours."""
    ports: tuple[int, ...] = ()
    host: str = "127.0.0.1"
    """The address it listens on: its ports are busy only if taken on this address (a node
    of the local Cassandra ring listens on 127.0.0.2)."""
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: Path | None = None

    def pid(self) -> int | None:
        """The pid of our running process, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        cmdline = _cmdline(pid)
        # Right after exec the kernel briefly shows an empty command line.
        for _ in range(40):
            if cmdline != "" or not _alive(pid):
                break
            time.sleep(0.05)
            cmdline = _cmdline(pid)
        if cmdline and (self.marker in cmdline or (self.title and self.title in cmdline)):
            return pid
        self.pid_file.unlink(missing_ok=True)
        return None

    def start(self) -> int:
        """Launch the process detached, in its own session; return its pid."""
        running = self.pid()
        if running is not None:
            return running
        busy = [port for port in self.ports if port_open(port, self.host)]
        if busy:
            raise ServiceStartError(
                f"{self.name}: port(s) {busy} on {self.host} already in use by a process this "
                "platform did not start. Stop it, or change the port in settings (WAP_* "
                "variables)."
            )
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self._environment(),
                start_new_session=True,
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc.pid

    def _environment(self) -> dict[str, str]:
        """This process's environment plus :attr:`env`; when ``env`` carries settings
        (``WAP_ENVIRONMENT``), without this process's other ``WAP_*`` variables, which would
        override the sections' values."""
        base = dict(os.environ)
        if "WAP_ENVIRONMENT" in self.env:
            base = {k: v for k, v in base.items() if not k.startswith("WAP_")}
        return base | dict(self.env)

    def wait_healthy(self, probe: Callable[[], bool], timeout_s: float) -> float:
        """Poll ``probe`` until it passes; return the seconds it took.

        Raises :class:`ServiceStartError` with the log tail if the process dies
        or the probe does not pass in time.
        """
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.pid() is None:
                raise ServiceStartError(
                    f"{self.name} exited during start-up. Last lines of {self.log_file}:\n"
                    f"{log_tail(self.log_file)}"
                )
            if probe():
                return time.monotonic() - started
            time.sleep(0.5)
        raise ServiceStartError(
            f"{self.name} not healthy after {timeout_s:.0f}s. Last lines of {self.log_file}:\n"
            f"{log_tail(self.log_file)}"
        )

    def stop(self, timeout_s: float = 60.0) -> bool:
        """SIGTERM the process group, SIGKILL after ``timeout_s``; False if it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
            while _alive(pid):
                time.sleep(0.1)
        self.pid_file.unlink(missing_ok=True)
        return True

    def started_at(self) -> datetime | None:
        """When our running process started (from its pid file's mtime), or None."""
        if self.pid() is None:
            return None
        return datetime.fromtimestamp(self.pid_file.stat().st_mtime, UTC)

    def rss_mb(self) -> float | None:
        """Resident memory of the running process in MiB, from /proc."""
        pid = self.pid()
        if pid is None:
            return None
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except FileNotFoundError:
            return None
        return None


def _cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of ours still answers kill(0); treat it as gone.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    if state == "Z":
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        return False
    return True


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, sig)
