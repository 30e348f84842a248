"""The speed layer as the platform runs it: ``python -m speed_layer`` in a process of its own,
or its service loop in a thread of the test's process."""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.settings import PROJECT_ROOT, Settings, child_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SpeedJob", "SpeedThread", "kill_leftover_jobs", "wait_until", "with_short_replays"]

_STARTED: list[subprocess.Popen] = []


class SpeedJob:
    """``python -m speed_layer`` in a subprocess, as the platform runs it."""

    @staticmethod
    def start(settings: Settings, *args: str) -> subprocess.Popen:
        # Logs go to a file: a pipe nobody reads would fill up and block the job.
        log = Path(settings.lake.root).parent / f"speed-{time.monotonic_ns()}.log"
        with log.open("wb") as handle:
            job = subprocess.Popen(
                [sys.executable, "-m", "speed_layer", "--instance", "test", *args],
                env=child_env(settings),
                cwd=PROJECT_ROOT,
                stdout=subprocess.DEVNULL,
                stderr=handle,
                start_new_session=True,
            )
        job.log = log  # type: ignore[attr-defined]
        _STARTED.append(job)
        return job

    @staticmethod
    def log_tail(job: subprocess.Popen) -> str:
        return job.log.read_text(errors="replace")[-4000:]  # type: ignore[attr-defined]

    def __init__(self, spark: SparkSession | None = None) -> None:
        self.spark = spark

    def drain(self, settings: Settings) -> None:
        """Process everything in the log now, then stop; it must end with 0.

        In this process, on a new SQL session of ``spark`` (``speed_layer.cli.drain``,
        the code ``--drain`` runs), when the job was made with one: a JVM of its own is for
        what a test does to the process (kill -9, an outage, a replay switching over).
        """
        if self.spark is not None:
            from speed_layer.cli import drain

            assert drain(self.spark, settings) == 0
            return
        job = self.start(settings, "--drain")
        assert job.wait(600) == 0, self.log_tail(job)


class SpeedThread:
    """What ``python -m speed_layer`` runs (:func:`speed_layer.cli.serve`: every streamed
    pipeline's queries, their replays and switches, until stopped) in a thread of this
    process, on a new SQL session of ``spark`` per pipeline: for a test about what the speed
    layer writes while other work runs, not about its process (a kill, an outage).

    ``with SpeedThread(spark, settings) as job:``; ``job.poll()`` is None while it runs,
    then its exit code; leaving the block stops it gracefully and checks it ended with 0.
    """

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark, self.settings = spark, settings
        self.stopping = threading.Event()
        self.code: int | None = None
        self.records: collections.deque[str] = collections.deque(maxlen=40)
        self._handler = _Keep(self.records)
        self._thread = threading.Thread(target=self._run, name="speed-layer", daemon=True)

    def _run(self) -> None:
        from speed_layer.cli import serve
        from speed_layer.metrics import SpeedMetrics

        try:
            self.code = serve(
                self.spark,
                self.settings,
                drain=False,
                stopping=self.stopping,
                metrics=SpeedMetrics(),
            )
        except BaseException as exc:
            self.records.append(f"serve raised {exc!r}")
            self.code = 1

    def poll(self) -> int | None:
        return self.code

    def log_tail(self) -> str:
        return "\n".join(self.records)

    def __enter__(self) -> SpeedThread:
        logging.getLogger("speed_layer").addHandler(self._handler)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._thread.join(120)
        logging.getLogger("speed_layer").removeHandler(self._handler)
        if exc[0] is None:
            assert not self._thread.is_alive(), "the speed layer did not stop"
            assert self.code == 0, self.log_tail()


class _Keep(logging.Handler):
    """Keeps the speed layer's last log lines, for a test's failure message."""

    def __init__(self, into: collections.deque[str]) -> None:
        super().__init__(logging.INFO)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(f"{record.name} {record.getMessage()} {getattr(record, 'fields', '')}")


def kill_leftover_jobs() -> None:
    """Kill (SIGKILL, its whole process group) every speed job started here that is still
    running: a test that failed half way may leave one writing to its keyspace."""
    while _STARTED:
        job = _STARTED.pop()
        if job.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(job.pid, signal.SIGKILL)
            job.wait(30)


def speed_cli(settings: Settings, *args: str) -> subprocess.CompletedProcess:
    """``python -m speed_layer ARGS`` (a replay or reset request) with ``settings``."""
    return subprocess.run(
        [sys.executable, "-m", "speed_layer", *args],
        env=child_env(settings),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def with_short_replays(settings: Settings) -> Settings:
    """``settings`` with short replay catch-up, grace and poll periods, so a Kappa replay
    switches within a test."""
    speed = settings.speed.model_copy(
        update={
            "replay_max_lag": 0,
            "replay_sustain_s": 3.0,
            "replay_grace_s": 5.0,
            "replay_poll_s": 1.0,
        }
    )
    return settings.model_copy(update={"speed": speed})


def wait_until(check, timeout_s: float, what: str, job=None, log_tail=None):
    """Poll ``check`` until truthy; fail with the job's log when it exits or time runs out."""
    log_tail = log_tail or _log_tail
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        if job is not None and (code := job.poll()) is not None:
            pytest.fail(f"the speed job exited ({code}) waiting for {what}:\n{log_tail(job)}")
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}" + (f":\n{log_tail(job)}" if job else ""))


def _log_tail(job: subprocess.Popen | SpeedThread) -> str:
    return job.log_tail() if isinstance(job, SpeedThread) else SpeedJob.log_tail(job)
