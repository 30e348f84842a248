"""A platform service as its real process (``python -m ...`` with the settings in its
environment), for the tests that attack what it serves or start it as operators do."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from core.settings import PROJECT_ROOT, Settings, child_env

__all__ = ["service_process", "started_service"]


@contextmanager
def started_service(
    module_args: list[str],
    settings: Settings,
    port: int,
    log: Path,
    until: Callable[[httpx.Response], bool] = lambda _answer: True,
    timeout_s: float = 120,
    stop_s: float = 30,
    headers: dict[str, str] | None = None,
) -> Iterator[tuple[subprocess.Popen, str, httpx.Response]]:
    """Run ``python -m <module_args>`` until the block ends, once an answer of its ``/health``
    (asked with ``headers``) satisfies ``until`` (by default any answer); yields the process,
    its base URL and that answer. Its output goes to ``log``; a process that exits or does
    not answer in time fails with the tail of it. Still running at the end, it gets SIGTERM
    and ``stop_s``."""
    url = f"http://127.0.0.1:{port}"
    with log.open("a") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", *module_args],
            env=child_env(settings),
            cwd=PROJECT_ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                answer = httpx.get(f"{url}/health", headers=headers, timeout=5)
                if until(answer):
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{' '.join(module_args)} did not start:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.1)
        yield proc, url, answer
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(stop_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _started(answer: httpx.Response) -> bool:
    """Whether a ``/health`` answer is past start-up: a service whose workers do not all
    listen yet answers 503 with ``starting`` (as its status or its error), anything else is
    the service's own state."""
    if answer.status_code != 503:
        return True
    try:
        body = answer.json()
    except ValueError:
        return True
    return "starting" not in (body.get("status"), body.get("error"))


@contextmanager
def service_process(
    module_args: list[str], settings: Settings, port: int, log: Path, timeout_s: float = 120
) -> Iterator[str]:
    """:func:`started_service` once ``/health`` answers as started (every worker listening,
    whatever else it says); yields its base URL."""
    started = started_service(module_args, settings, port, log, until=_started, timeout_s=timeout_s)
    with started as (_, url, _):
        yield url
