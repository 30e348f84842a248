"""A real HTTP server for the tests that need one: uvicorn in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

__all__ = ["serving"]


@contextmanager
def serving(config: uvicorn.Config, start_timeout_s: float = 20) -> Iterator[str]:
    """Serve ``config``'s app until the block ends; yields its base URL."""
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, f"the server on port {config.port} did not start"
    try:
        yield f"http://{config.host}:{config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=40)
