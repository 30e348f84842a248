"""The batch step server (``python -m batch_layer serve``) as a process of its own."""

from __future__ import annotations

from pathlib import Path

from core.settings import Settings

__all__ = ["StepServerProcess"]


class StepServerProcess:
    """A batch step server (``python -m batch_layer serve``) run with ``settings``; its output
    goes to ``log``. :meth:`restart` stops it and starts another on the same port."""

    def __init__(self, settings: Settings, log: Path) -> None:
        self.settings, self.log = settings, log
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.settings.batch.step_server_port}"

    def start(self) -> None:
        import subprocess
        import sys
        import time

        import httpx

        from core.settings import PROJECT_ROOT, child_env

        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "batch_layer", "serve"],
                env=child_env(self.settings),
                cwd=PROJECT_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(self.log.read_text()[-3000:])
            time.sleep(0.5)

    def stop(self) -> None:
        import subprocess

        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.start()
