"""A platform service as its real process (``python -m ...`` with the settings in its
environment), for the tests that attack what it serves."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from core.settings import PROJECT_ROOT, Settings, child_env

__all__ = ["service_process"]


@contextmanager
def service_process(
    module_args: list[str], settings: Settings, port: int, log: Path, timeout_s: float = 120
) -> Iterator[str]:
    """Run ``python -m <module_args>`` until the block ends, once its ``/health`` answers (any
    status); yields its base URL. Its output goes to ``log``; a process that exits or does not
    answer in time fails with the tail of it."""
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
                httpx.get(f"{url}/health", timeout=5)
                break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"{' '.join(module_args)} did not start:\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
