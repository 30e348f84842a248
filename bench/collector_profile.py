"""Where the collector's CPU goes per event: its request path profiled in one process.

Calls the collector's ASGI app directly (no sockets, no HTTP parsing by
uvicorn) with the collector benchmark's ``/v1/batch`` bodies, and a producer
that acknowledges every record at once (no Kafka), so what is measured is the
Python the collector runs per request and per event: the body, auth, the
browser conventions, anonymisation, enrichment, validation, encoding, the
answer and the metrics. Prints microseconds per event (CPU time, best of the
repeats) and, with ``--profile``, the functions that take most of it (cProfile).

    .venv/bin/python -m bench.collector_profile --requests 300 --batch 100 --profile 25
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections.abc import Sequence
from typing import Any

from bench.collector_throughput import request_bodies
from core.collector_settings import CollectorSettings
from core.settings import load_settings

_AUTH = b"Basic YmVuY2gtd3JpdGUta2V5LTAwMDE6"  # bench-write-key-0001, no password


class _InstantProducer:
    """Acknowledges every record at once: the collector's side of ``deliver`` only."""

    queue_depth = 0

    async def deliver(self, topic_records: Sequence[Any]) -> None:
        return None

    async def probe(self, timeout_s: float = 2.0) -> bool:
        return True

    def close(self, timeout_s: float = 30.0) -> int:
        return 0


class _NoSuppressions:
    size, lag = 0, 0
    loaded = type("Loaded", (), {"wait": staticmethod(lambda _t=None: True)})()

    def suppresses(self, event: Any) -> bool:
        return False

    def status(self) -> dict[str, Any]:
        return {"size": 0, "lag": 0, "loaded": True}

    def close(self) -> None:
        pass


async def _post(app: Any, body: bytes) -> int:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/batch",
        "raw_path": b"/v1/batch",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"authorization", _AUTH),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8088),
    }
    sent = False
    status = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _run(app: Any, bodies: list[bytes], profile: cProfile.Profile | None) -> float:
    """CPU seconds of posting every body once."""
    started = time.process_time()
    if profile is not None:
        profile.enable()
    for body in bodies:
        status = await _post(app, body)
        if status != 200:
            raise RuntimeError(f"the collector answered {status}")
    if profile is not None:
        profile.disable()
    return time.process_time() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--batch", type=int, default=100, help="events per request")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", type=int, default=0, help="print this many functions")
    args = parser.parse_args(argv)

    from ingest.app import create_app

    settings = load_settings().model_copy(
        update={"collector": CollectorSettings(write_keys={"bench": "bench-write-key-0001"})}
    )
    app = create_app(settings, _InstantProducer(), _NoSuppressions())  # type: ignore[arg-type]
    _, bodies = request_bodies("profile", args.batch, args.requests * args.batch)

    async def measure() -> None:
        async with app.router.lifespan_context(app):
            await _run(app, bodies[:20], None)  # warm-up
            best = min([await _run(app, bodies, None) for _ in range(args.repeats)])
            events = len(bodies) * args.batch
            print(
                f"[bench] {1e6 * best / events:.1f} us of collector CPU per event "
                f"({len(bodies)} requests of {args.batch} events, best of {args.repeats})"
            )
            if args.profile:
                profile = cProfile.Profile()
                await _run(app, bodies, profile)
                stats = pstats.Stats(profile).strip_dirs().sort_stats("tottime")
                stats.print_stats(args.profile)

    asyncio.run(measure())


if __name__ == "__main__":
    main()
