"""Serving latency and throughput: merged HTTP answers vs the raw Cassandra reads of the same rows.

Runs on the local platform (it brings Cassandra up if needed). It loads a
bench keyspace with two hours of per-minute rows for 200 pages in both the
speed and the batch tables (realistic HLL and KLL sketches), publishes the
first hour as batch (boundary in the middle), starts a real serving process
(``python -m serving serve``, uvicorn workers), then, in one run, from a
load-generator process of its own:

1. **timeseries**: one hour of minutes for one page, straddling the boundary
   (30 batch + 30 speed windows), at a fixed request rate (open loop:
   latency counts from the moment a request was due, so a stall is not
   hidden), then at saturation (closed loop, many connections);
2. **top-N**: the 5 slowest pages (p95 of the merged KLL) in the last
   minute, and the top 10 pages by views over the last 15 minutes, closed loop;
3. **raw**: the same Cassandra reads with the Python driver, no HTTP, no
   merge (two partition slices per timeseries; one / 15 window partitions
   per top-N), at the same rate and at saturation.

Figures are printed and written to ``.platform/artifacts/bench_serving.json``;
nothing is asserted.

    .venv/bin/python -m bench.serving_latency --rate 1000 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import random
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

from core.settings import ServingSettings, Settings, load_settings, settings_env
from platformctl import platform
from platformctl.process import port_open

TOKEN = "bench-read-token"
T0 = datetime(2024, 1, 1, 10, 0, tzinfo=UTC)
BOUNDARY = T0 + timedelta(hours=1)
PAGES = 200
_LENGTH = re.compile(rb"content-length: *(\d+)", re.IGNORECASE)


# -- data -------------------------------------------------------------------------------------


def _page_rows(minutes: int, seed: int) -> list[dict]:
    import datasketches as ds

    from views.common import HLL_LG_K

    rng = random.Random(seed)
    rows = []
    for i in range(minutes):
        start = T0 + timedelta(minutes=i)
        for p in range(PAGES):
            views = max(1, int(200 / (p + 1)))
            hll = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
            kll = ds.kll_doubles_sketch(200)
            loads = [rng.lognormvariate(5.5, 0.5) * (1 + p % 7) for _ in range(views)]
            for _ in range(views):
                hll.update(f"u{rng.randrange(5000)}")
            for load in loads:
                kll.update(load)
            rows.append(
                {
                    "window_start": start,
                    "path": f"/p/{p}",
                    "page_views": views,
                    "visitors": hll.serialize_compact(),
                    "load_count": len(loads),
                    "load_sum": sum(loads),
                    "load_max": max(loads),
                    "load_sketch": kll.serialize(),
                }
            )
    return rows


def load_data(settings: Settings) -> None:
    """Create the bench keyspace and write speed and batch rows (idempotent)."""
    from cassandra.concurrent import execute_concurrent_with_args

    from core.cassandra import connect, ensure_keyspace
    from layout import PointerTables, ViewTables, create_statements
    from speed_layer.sink import write_rows
    from views import view

    keyspace = settings.cassandra.keyspace
    cluster, session = connect(settings.cassandra)
    try:
        ensure_keyspace(session, keyspace, settings.cassandra.replication)
        for statement in create_statements(keyspace, settings.speed.ttl_s):
            session.execute(statement)
        spec = view("page_activity")
        rows = _page_rows(120, seed=1)
        write_rows(rows, ViewTables(spec, keyspace, "speed"), settings.cassandra, batch_id=1)
        tables, version = ViewTables(spec, keyspace, "batch"), 1
        batch = [r for r in rows if r["window_start"] < BOUNDARY + timedelta(minutes=5)]
        measures = [m.name for m in spec.measures]
        bound = [
            tables.bind(r["window_start"], [r["path"]], [r[m] for m in measures], version=version)
            for r in batch
        ]
        for text, args in (
            (tables.insert_by_key(), [by_key for by_key, _ in bound]),
            (tables.insert_by_minute(), [by_minute for _, by_minute in bound]),
        ):
            for ok, result in execute_concurrent_with_args(session, session.prepare(text), args):
                if not ok:
                    raise result
        now = datetime.now(UTC)
        pointers = PointerTables(keyspace)
        session.execute(
            session.prepare(pointers.insert_day),
            ("page_activity", T0.date(), version, len(batch), now),
        )
        session.execute(
            session.prepare(pointers.insert_boundary),
            ("page_activity", BOUNDARY, version, "bench", now),
        )
    finally:
        cluster.shutdown()


# -- HTTP load generator (a process of its own) ------------------------------------------------


async def _http_worker(host, port, requests, due, latencies, errors) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    turn = random.randrange(len(requests))
    try:
        while True:
            intended = await due.get()
            if intended is None:
                return
            turn += 1
            writer.write(requests[turn % len(requests)])
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(_LENGTH.search(head).group(1))
            await reader.readexactly(length)
            if head[9:12] != b"200":
                errors.append(head[:12].decode())
            latencies.append(time.perf_counter() - intended)
    finally:
        writer.close()


async def _drive(run_one, connections: int, rate: float | None, seconds: float, warmup: float):
    """Open loop at ``rate`` (None: closed loop); returns latencies (s) and elapsed time."""
    due: asyncio.Queue = asyncio.Queue()
    latencies: list[float] = []
    errors: list[str] = []
    workers = [asyncio.ensure_future(run_one(due, latencies, errors)) for _ in range(connections)]
    started = time.perf_counter()
    measured_from = started + warmup
    end = measured_from + seconds
    sent = 0
    if rate is None:
        for _ in range(connections * 2):
            due.put_nowait(time.perf_counter())
        while time.perf_counter() < end:
            await asyncio.sleep(0.001)
            while due.qsize() < connections:
                due.put_nowait(time.perf_counter())
    else:
        interval = 1.0 / rate
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            while started + sent * interval <= now:
                due.put_nowait(started + sent * interval)
                sent += 1
            await asyncio.sleep(max(0.0, started + sent * interval - time.perf_counter()))
    while not due.empty():
        due.get_nowait()
    for _ in workers:
        due.put_nowait(None)
    await asyncio.gather(*workers)
    elapsed = time.perf_counter() - started
    return latencies, errors, elapsed


def _summary(name: str, latencies: list[float], errors: list[str], elapsed: float, warmup: float):
    # Drop the warm-up share (requests are roughly uniform in time).
    skip = int(len(latencies) * warmup / elapsed)
    kept = sorted(latencies[skip:])
    n = len(kept)
    if not n:
        return {"name": name, "requests": 0, "errors": len(errors)}
    return {
        "name": name,
        "requests": n,
        "rps": round(n / (elapsed - warmup), 1),
        "p50_ms": round(kept[n // 2] * 1000, 2),
        "p99_ms": round(kept[min(n - 1, int(n * 0.99))] * 1000, 2),
        "max_ms": round(kept[-1] * 1000, 2),
        "errors": len(errors),
    }


def _http_run(args: tuple) -> dict:
    name, host, port, paths, connections, rate, seconds, warmup = args
    import uvloop

    requests = [
        (
            f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        ).encode()
        for path in paths
    ]

    async def main():
        def one(due, latencies, errors):
            return _http_worker(host, port, requests, due, latencies, errors)

        return await _drive(one, connections, rate, seconds, warmup)

    latencies, errors, elapsed = uvloop.run(main())
    return _summary(name, latencies, errors, elapsed, warmup)


# -- raw Cassandra load (a process of its own) --------------------------------------------------


def _raw_run(args: tuple) -> dict:
    name, settings_json, kind, connections, rate, seconds, warmup = args
    import uvloop
    from cassandra.cluster import EXEC_PROFILE_DEFAULT
    from cassandra.query import tuple_factory

    from core.cassandra import connect
    from core.settings import Settings
    from layout import ViewTables
    from serving.store import _await
    from views import view

    settings = Settings.model_validate_json(settings_json)
    cluster, session = connect(settings.cassandra)
    profile = session.execution_profile_clone_update(
        EXEC_PROFILE_DEFAULT, row_factory=tuple_factory
    )
    spec = view("page_activity")
    speed_tables = ViewTables(spec, settings.cassandra.keyspace, "speed")
    batch_tables = ViewTables(spec, settings.cassandra.keyspace, "batch")
    every = [m.name for m in spec.measures]
    measures = ["page_views", "visitors"] if kind.endswith("views+visitors") else every
    calls_per_page = []
    for page in range(PAGES):
        path = f"/p/{page}"
        if kind.startswith("ts-speed"):
            lo, hi = BOUNDARY, BOUNDARY + timedelta(hours=1)
            speed = session.prepare(speed_tables.select_range(measures))
            calls = [(speed, (path, lo.date(), lo, hi))]
        elif kind.startswith("ts-straddle"):
            lo, mid, hi = (BOUNDARY + timedelta(minutes=m) for m in (-30, 0, 30))
            batch = session.prepare(batch_tables.select_range(measures))
            speed = session.prepare(speed_tables.select_range(measures))
            calls = [(batch, (path, lo.date(), 1, lo, mid)), (speed, (path, mid.date(), mid, hi))]
        elif kind == "slowest":
            minute = session.prepare(speed_tables.select_minute(["load_sketch"]))
            calls = [(minute, (T0 + timedelta(minutes=119),))]
        else:
            minute = session.prepare(speed_tables.select_minute(["page_views"]))
            calls = [(minute, (T0 + timedelta(minutes=105 + i),)) for i in range(15)]
        calls_per_page.append(calls)
        if kind in ("slowest", "top"):
            break

    async def worker(due, latencies, errors):
        turn = random.randrange(len(calls_per_page))
        while True:
            intended = await due.get()
            if intended is None:
                return
            turn += 1
            calls = calls_per_page[turn % len(calls_per_page)]
            try:
                await asyncio.gather(*(_await(session, s, p, profile) for s, p in calls))
            except Exception as exc:
                errors.append(str(exc))
            latencies.append(time.perf_counter() - intended)

    async def main():
        return await _drive(worker, connections, rate, seconds, warmup)

    latencies, errors, elapsed = uvloop.run(main())
    cluster.shutdown()
    return _summary(name, latencies, errors, elapsed, warmup)


def _in_process(target, args) -> dict:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(target, (args,))


# -- the run --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving_latency", description=__doc__)
    parser.add_argument("--rate", type=float, default=1000.0, help="fixed request rate (req/s)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="serving processes")
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument("--keyspace", default="bench_serving")
    parser.add_argument("--only", default="", help="run only phases whose name contains this")
    parser.add_argument("--no-load", action="store_true", help="reuse the loaded keyspace")
    args = parser.parse_args(argv)

    base = load_settings()
    platform.up(base, ("cassandra",))
    settings = base.model_copy(
        update={
            "cassandra": base.cassandra.model_copy(update={"keyspace": args.keyspace}),
            "serving": ServingSettings(
                **base.serving.model_dump()
                | {"port": args.port, "workers": args.workers, "api_tokens": {"bench": TOKEN}}
            ),
        }
    )
    if not args.no_load:
        print(f"loading {PAGES} pages x 120 minutes into {args.keyspace} ...", flush=True)
        load_data(settings)
    log = settings.local.state_dir / "logs" / "bench-serving.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "serving", "serve", "--instance", "bench"],
            env={**os.environ, **settings_env(settings)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    results = []
    try:
        deadline = time.monotonic() + 60
        while not port_open(args.port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serving did not start; see {log}")
            time.sleep(0.2)
        time.sleep(2)
        fmt = "%Y-%m-%dT%H:%M:%SZ"

        def series(lo, hi, extra=""):
            return [
                f"/v1/timeseries?view=page_activity&key=/p/{p}"
                f"&start={lo:{fmt}}&end={hi:{fmt}}{extra}"
                for p in range(PAGES)
            ]

        hour = (BOUNDARY, BOUNDARY + timedelta(hours=1))
        straddle = (BOUNDARY - timedelta(minutes=30), BOUNDARY + timedelta(minutes=30))
        end = T0 + timedelta(minutes=120)
        slowest = [
            f"/v1/top?view=page_activity&measure=load_sketch&n=5"
            f"&start={end - timedelta(minutes=1):{fmt}}&end={end:{fmt}}"
        ]
        top = [
            f"/v1/top?view=page_activity&measure=page_views&n=10"
            f"&start={end - timedelta(minutes=15):{fmt}}&end={end:{fmt}}"
        ]
        few = "&measure=page_views&measure=visitors"
        sj = settings.model_dump_json()
        host, port, s, w, c, r = (
            "127.0.0.1",
            args.port,
            args.seconds,
            args.warmup,
            args.connections,
            args.rate,
        )
        phases = [
            (_http_run, ("serving ts-speed all @rate", host, port, series(*hour), c, r, s, w)),
            (_raw_run, ("raw ts-speed all @rate", sj, "ts-speed", c, r, s, w)),
            (
                _http_run,
                (
                    "serving ts-speed views+visitors @rate",
                    host,
                    port,
                    series(*hour, few),
                    c,
                    r,
                    s,
                    w,
                ),
            ),
            (
                _raw_run,
                ("raw ts-speed views+visitors @rate", sj, "ts-speed views+visitors", c, r, s, w),
            ),
            (
                _http_run,
                ("serving ts-straddle all @rate", host, port, series(*straddle), c, r, s, w),
            ),
            (_raw_run, ("raw ts-straddle all @rate", sj, "ts-straddle", c, r, s, w)),
            (_http_run, ("serving ts-speed all max", host, port, series(*hour), c, None, s, w)),
            (_raw_run, ("raw ts-speed all max", sj, "ts-speed", c, None, s, w)),
            (
                _http_run,
                (
                    "serving ts-speed views+visitors max",
                    host,
                    port,
                    series(*hour, few),
                    c,
                    None,
                    s,
                    w,
                ),
            ),
            (
                _raw_run,
                ("raw ts-speed views+visitors max", sj, "ts-speed views+visitors", c, None, s, w),
            ),
            (_http_run, ("serving top-5 slowest 1 min max", host, port, slowest, c, None, s, w)),
            (_raw_run, ("raw top-5 slowest 1 min max", sj, "slowest", c, None, s, w)),
            (_http_run, ("serving top-10 pages 15 min max", host, port, top, c, None, s, w)),
            (_raw_run, ("raw top-10 pages 15 min max", sj, "top", c, None, s, w)),
        ]
        for target, phase in phases:
            if args.only not in phase[0]:
                continue
            result = _in_process(target, phase)
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)
    _print(results, args)
    out = settings.local.state_dir / "artifacts" / "bench_serving.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    print(f"written to {out}")
    return 0


def _print(results: list[dict], args) -> None:
    print(f"\n{'phase':<40} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'errors':>6}")
    for r in results:
        print(
            f"{r['name']:<40} {r.get('rps', 0):>9} {r.get('p50_ms', '-'):>8} "
            f"{r.get('p99_ms', '-'):>8} {r.get('max_ms', '-'):>8} {r['errors']:>6}"
        )
    by = {r["name"]: r for r in results}
    for r in results:
        if not r["name"].startswith("serving "):
            continue
        what = r["name"].removeprefix("serving ")
        raw = by.get(f"raw {what}")
        if raw and r.get("rps") and raw.get("rps"):
            print(
                f"ratio serving/raw {what}: req/s {r['rps'] / raw['rps']:.2f}, "
                f"p50 {r['p50_ms'] / raw['p50_ms']:.1f}x, p99 {r['p99_ms'] / raw['p99_ms']:.1f}x"
            )


if __name__ == "__main__":
    sys.exit(main())
