"""Pid-file ownership with real child processes (``sleep``), no services needed."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from platformctl.process import ManagedProcess, ServiceStartError, log_tail, port_open


def _sleeper(tmp_path, marker="--sleeper-marker") -> ManagedProcess:
    # A Python child whose command line carries the marker, as a JVM's carries its config path.
    return ManagedProcess(
        name="sleeper",
        argv=[sys.executable, "-c", "import time; time.sleep(60)", marker],
        pid_file=tmp_path / "run" / "sleeper.pid",
        log_file=tmp_path / "logs" / "sleeper.out",
        marker=marker,
    )


def test_start_is_idempotent_and_stop_ends_the_process(tmp_path):
    process = _sleeper(tmp_path)
    pid = process.start()
    try:
        assert process.pid() == pid
        assert process.start() == pid  # up twice is a no-op
        assert process.rss_mb() > 0
    finally:
        assert process.stop(timeout_s=10) is True
    assert process.pid() is None
    assert not process.pid_file.exists()
    assert process.stop() is False  # nothing of ours left to stop


def test_stale_pid_file_does_not_block_and_foreign_pid_is_never_killed(tmp_path):
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        process = _sleeper(tmp_path)
        process.pid_file.parent.mkdir(parents=True)
        process.pid_file.write_text(f"{foreign.pid}\n")  # a recycled pid, not ours
        assert process.pid() is None
        assert process.stop() is False
        assert foreign.poll() is None  # still alive
        process.pid_file.write_text("not-a-pid")
        pid = process.start()
        assert pid != foreign.pid
        process.stop(timeout_s=10)
    finally:
        foreign.kill()
        foreign.wait()


def test_wait_healthy_reports_log_tail_when_the_process_dies(tmp_path):
    process = ManagedProcess(
        name="crasher",
        argv=[sys.executable, "-c", "print('boom: bad config'); raise SystemExit(2)", "--crash"],
        pid_file=tmp_path / "crasher.pid",
        log_file=tmp_path / "crasher.out",
        marker="--crash",
    )
    process.start()
    with pytest.raises(ServiceStartError, match="boom: bad config"):
        process.wait_healthy(lambda: False, timeout_s=20)


def test_busy_port_is_refused_with_a_clear_message(tmp_path):
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port_open(port)
        process = ManagedProcess(
            name="clash",
            argv=["true"],
            pid_file=tmp_path / "p",
            log_file=tmp_path / "l",
            marker="x",
            ports=(port,),
        )
        with pytest.raises(ServiceStartError, match=f"{port}.*already in use"):
            process.start()
        # The same port on another loopback address is free (a Cassandra ring's nodes).
        other = dataclasses.replace(_sleeper(tmp_path), ports=(port,), host="127.0.0.2")
        assert not port_open(port, "127.0.0.2")
        try:
            assert other.start() == other.pid()
        finally:
            other.stop(timeout_s=10)


def test_log_tail_of_missing_file(tmp_path):
    assert "no log" in log_tail(tmp_path / "missing.log")


def test_a_process_that_retitles_itself_stays_ours_by_its_title(tmp_path):
    # `exec -a` replaces the command line, marker included, as setproctitle does.
    process = ManagedProcess(
        name="retitled",
        argv=["bash", "-c", "exec -a retitled-sleeper sleep 60", "--retitle-marker"],
        pid_file=tmp_path / "retitled.pid",
        log_file=tmp_path / "retitled.out",
        marker="--retitle-marker",
        title="retitled-sleeper",
    )
    pid = process.start()
    try:
        for _ in range(100):
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"retitled-sleeper"):
                break
            time.sleep(0.05)
        assert process.pid() == pid
        untitled = dataclasses.replace(process, title=None)
        assert untitled.pid() is None  # the marker alone no longer proves it
    finally:
        os.kill(pid, signal.SIGKILL)
