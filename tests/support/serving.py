"""The serving app on real HTTP, in this process: what serving tests ask questions of."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from core.settings import Settings

__all__ = ["served"]


@contextmanager
def served(settings: Settings) -> Iterator[str]:
    """The serving app of ``settings`` (uvicorn in a thread) on ``serving.port``: its base URL,
    until the block ends."""
    import uvicorn

    from serving.app import create_app
    from serving.server import server_config

    # The server's own configuration (keep-alive, header timeout, httptools), this app.
    config = server_config(settings, create_app(settings))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("The serving app did not start; see the log above.")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{settings.serving.port}"
    finally:
        server.should_exit = True
        thread.join(10)
