"""The serving app on real HTTP, in this process: what serving tests ask questions of."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from core.settings import Settings
from tests.integration.asgi import serving

__all__ = ["served"]


@contextmanager
def served(settings: Settings) -> Iterator[str]:
    """The serving app of ``settings`` (uvicorn in a thread) on ``serving.port``, with the
    server's own configuration (keep-alive, header timeout, httptools): its base URL, until
    the block ends."""
    from serving.app import create_app
    from serving.server import server_config

    with serving(server_config(settings, create_app(settings)), start_timeout_s=30) as url:
        yield url
