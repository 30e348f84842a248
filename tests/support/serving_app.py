"""The serving app in this process on a store of known rows, asked through ASGI directly
(no server, no HTTP client): for the tests of its routes, hot path and gate."""

from __future__ import annotations

import asyncio

from serving.query import Queries
from serving.store import Pointers, ViewPointers
from serving.timerange import HOUR_MS, MINUTE_MS

__all__ = ["BOUNDARY", "NOW_MS", "TOKEN", "Apps", "Store", "queries_of"]

TOKEN = "hot-path-token-0001"
NOW_MS = 1_764_000_000_000 + 17_345  # not on a minute: start and end carry milliseconds
BOUNDARY = NOW_MS - NOW_MS % HOUR_MS - HOUR_MS


class Store:
    """Every key has a row in every window: counts, and no sketches (null)."""

    def __init__(self) -> None:
        from pipelines import declared_views

        self.views = {spec.name: spec for spec in declared_views()}
        view = ViewPointers(
            BOUNDARY,
            newest_event=NOW_MS - 5_000,
            watermark=NOW_MS - 600_000,
            heartbeat=NOW_MS - 2_000,
            kafka_lag=3,
            speed_run=1,
            batch_generation=1,
            speed_generation=1,
        )
        self._pointers = Pointers(dict.fromkeys(self.views, view), NOW_MS - 400, 0.0)

    def spec(self, view: str):
        return self.views[view]

    async def pointers(self) -> Pointers:
        return self._pointers

    def _value(self, view: str, measure: str, n: int):
        return None if self.views[view].measure(measure).kind in ("hll", "kll") else n

    async def key_rows(self, view, layer, keys, day, version, lo, hi, measures, grain="minute"):
        step = {"minute": MINUTE_MS, "hour": HOUR_MS, "day": 24 * HOUR_MS}[grain]
        first = lo + (-lo) % step
        return [
            (t, *(self._value(view, m, t // step % 7) for m in measures))
            for t in range(first, hi, step)
        ]

    async def window_rows(self, view, layer, measure, start, version, grain="minute"):
        return [(f"/p/{p}", self._value(view, measure, 50 - p)) for p in range(40)]


def queries_of() -> Queries:
    """A query core on :class:`Store`, with a clock that stands still."""
    queries = Queries(Store(), clock=lambda: NOW_MS / 1000)
    queries.results.clock = lambda: 1000.0  # every kept answer the same age
    return queries


def _scope(path: str, headers: list[tuple[bytes, bytes]] | None) -> dict:
    route, _, query = path.partition("?")
    auth = [(b"authorization", f"Bearer {TOKEN}".encode())]
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": route,
        "raw_path": route.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"test"), *(auth if headers is None else headers)],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8090),
    }


class Apps:
    """The two apps, started, and a way to ask both."""

    def __init__(self, hot, framework) -> None:
        self.hot, self.framework = hot, framework
        self.loop = asyncio.new_event_loop()

    def call(self, app, path: str, headers=None) -> tuple[int, list, bytes, bool]:
        """``(status, headers, body, by_framework)`` of one request."""
        scope = _scope(path, headers)
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        self.loop.run_until_complete(app(scope, receive, send))
        start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
        return start["status"], start["headers"], body, "route" in scope

    def both(self, path: str, headers=None):
        """The response of each app: (hot app's, framework app's)."""
        return self.call(self.hot, path, headers), self.call(self.framework, path, headers)
