"""What a shared dashboard answer costs a serving worker: through FastAPI, and through the hot
path in front of it (``serving/hot.py``), in one run.

No Cassandra: the app's query core reads a store of generated rows held in
memory (:class:`MemoryStore`, the bench keyspace's shape: 200 pages and the
site, pointers that do not move), so after the first request of each
question every answer is shared, as almost all of a dashboard's are.

- **in process**: the dashboard's mix of requests (the one
  ``bench.serving_latency`` sends: site timeseries, site reach, top pages,
  slowest pages, over the page's range choices) called on the ASGI app
  directly, no network, no server: the CPU per request with the hot path
  off (``serving.hot_path = false``: every request through FastAPI) and on,
  rounds alternating, the median round of each;
- **over HTTP** (``--http-seconds`` > 0): one uvicorn worker as ``python -m
  serving serve`` runs it (uvloop, httptools) on loopback, closed loop from
  a load-generator process (``bench.serving_latency``'s), for each path: the
  requests/s and the server's CPU per request.

    .venv/bin/python -m bench.serving_hot_path                    # ~1.5 minutes
    .venv/bin/python -m bench.serving_hot_path --http-seconds 0   # in process only
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime

from bench.serving_data import Layout, _minute_sketches, questions
from bench.serving_latency import TOKEN, _http_run, _in_process
from core.settings import ServingSettings, Settings, child_env, load_settings
from pipelines import declared_views
from platformctl.process import port_open
from serving.store import Pointers, ViewPointers
from serving.timerange import HOUR_MS, MINUTE_MS

__all__ = ["MemoryStore", "app_factory", "main"]

_PAGES = 200
_STEP = {"minute": MINUTE_MS, "hour": HOUR_MS, "day": 24 * HOUR_MS}


class MemoryStore:
    """The reads :class:`serving.store.ServingStore` answers, from rows generated on the fly:
    every key has a row in every window, counts falling with the page's rank, sketches
    drawn from a small pool. Pointers are fixed (boundary at the start of the previous
    hour), so every question, once computed, stays shared."""

    def __init__(self, now_ms: int) -> None:
        self.views = {spec.name: spec for spec in declared_views()}
        self.pointer_cache_s = 1.0
        boundary = now_ms - now_ms % HOUR_MS - HOUR_MS
        progress = {
            "newest_event": now_ms,
            "watermark": now_ms - 10 * MINUTE_MS,
            "heartbeat": now_ms,
            "kafka_lag": 0,
            "speed_run": 1,
        }
        self._pointers = Pointers(
            {
                name: ViewPointers(boundary, batch_generation=1, speed_generation=1, **progress)
                for name in self.views
            },
            now_ms,
            time.monotonic(),
        )
        rng = random.Random(1)
        self._sketches = [_minute_sketches(views, rng)[:2] for views in (1, 10, 100)]

    def spec(self, view: str):
        return self.views[view]

    async def pointers(self) -> Pointers:
        return self._pointers

    def _value(self, view: str, measure: str, rank: int) -> object:
        kind = self.views[view].measure(measure).kind
        if kind in ("hll", "kll"):
            return self._sketches[rank % 3][kind == "kll"]
        return max(1, 200 // (rank + 1))

    async def key_rows(self, view, layer, keys, day, version, lo, hi, measures, grain="minute"):
        step = _STEP[grain]
        first = lo + (-lo) % step
        return [
            (start, *(self._value(view, m, start // step % 7) for m in measures))
            for start in range(first, hi, step)
        ]

    async def window_rows(self, view, layer, measure, start, version, grain="minute"):
        return [(f"/p/{p}", self._value(view, measure, p)) for p in range(_PAGES)]


def _settings(hot_path: bool, port: int = 18091) -> Settings:
    base = load_settings()
    return base.model_copy(
        update={
            "serving": ServingSettings(
                **base.serving.model_dump()
                | {"port": port, "workers": 1, "api_tokens": {"bench": TOKEN}, "hot_path": hot_path}
            )
        }
    )


def app_factory():
    """The app of the HTTP phase's uvicorn worker, on a :class:`MemoryStore` (an entry point:
    settings from ``WAP_*``)."""
    import gc

    from serving.app import create_app
    from serving.query import Queries

    app = create_app(load_settings(), Queries(MemoryStore(int(time.time() * 1000))))
    gc.freeze()  # as serving.__main__.app_factory does
    gc.set_threshold(20_000, 20, 20)
    return app


def _dashboard() -> list[str]:
    return questions(Layout(datetime.now(UTC)))["dashboard"][0]


# -- in process ----------------------------------------------------------------------------------


def _scope(path: str) -> dict:
    route, _, query = path.partition("?")
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
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", f"Bearer {TOKEN}".encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", 8090),
    }


async def _call(app, scope: dict) -> int:
    status = 0

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def _asgi_costs(rounds: int, requests: int) -> dict:
    from serving.app import create_app
    from serving.query import Queries

    queries = Queries(MemoryStore(int(time.time() * 1000)))
    apps = {name: create_app(_settings(name == "hot"), queries) for name in ("framework", "hot")}
    scopes = [_scope(path) for path in _dashboard()]
    costs: dict[str, list[float]] = {name: [] for name in apps}
    async with AsyncExitStack() as running:
        for app in apps.values():
            await running.enter_async_context(app.router.lifespan_context(app))
        for scope in scopes:  # every question computed once, then shared
            if await _call(apps["framework"], scope) != 200:
                raise RuntimeError(f"{scope['path']}?{scope['query_string']!r} failed")
        for _ in range(rounds):
            for name, app in apps.items():
                started = time.process_time()
                for i in range(requests):
                    await _call(app, scopes[i % len(scopes)])
                costs[name].append((time.process_time() - started) / requests * 1e6)
    framework, hot = (statistics.median(costs[n]) for n in ("framework", "hot"))
    return {
        "framework_us": round(framework, 1),
        "hot_us": round(hot, 1),
        "ratio": round(framework / hot, 2),
        "rounds_us": {n: [round(c) for c in v] for n, v in costs.items()},
    }


# -- over HTTP -----------------------------------------------------------------------------------


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _http(hot_path: bool, seconds: float, connections: int) -> dict:
    settings = _settings(hot_path)
    port = settings.serving.port
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.serving_hot_path:app_factory",
            "--factory",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--log-level",
            "warning",
            "--no-access-log",
        ],
        env=child_env(settings),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not port_open(port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the bench's serving worker did not start")
            time.sleep(0.2)
        paths = _dashboard()
        name = "hot path" if hot_path else "framework"
        # Every question once, so the closed loop measures shared answers.
        _in_process(_http_run, (name, "127.0.0.1", port, paths, 1, None, 2.0, 0.0))
        cpu = _cpu_s(server.pid)
        result = _in_process(
            _http_run, (name, "127.0.0.1", port, paths, connections, None, seconds, 0.0)
        )
        cpu = _cpu_s(server.pid) - cpu
    finally:
        server.terminate()
        server.wait(30)
    result["server_cpu_us_per_request"] = round(cpu / max(1, result["requests"]) * 1e6, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving_hot_path", description=__doc__)
    parser.add_argument("--rounds", type=int, default=15, help="in-process rounds per path")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--http-seconds", type=float, default=20.0, help="0: no HTTP phase")
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args(argv)

    import uvloop

    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    found = uvloop.run(_asgi_costs(args.rounds, args.requests))
    print(
        f"in process, CPU per shared dashboard request: framework {found['framework_us']} µs, "
        f"hot path {found['hot_us']} µs, ratio {found['ratio']}x",
        flush=True,
    )
    print(f"  rounds (µs): {found['rounds_us']}", flush=True)
    if args.http_seconds > 0:
        http = {hot: _http(hot, args.http_seconds, args.connections) for hot in (False, True)}
        for r in http.values():
            print(
                f"over HTTP, one worker, closed loop ({args.connections} connections): "
                f"{r['name']:<9} {r['rps']:>7} requests/s, p50 {r['p50_ms']} ms, "
                f"p99 {r['p99_ms']} ms, server CPU {r['server_cpu_us_per_request']} µs/request, "
                f"errors {r['errors']}, load average {r['load_avg_1m']}",
                flush=True,
            )
        print(f"requests/s ratio hot / framework: {http[True]['rps'] / http[False]['rps']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
