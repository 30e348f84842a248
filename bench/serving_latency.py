"""Serving latency and throughput with the whole platform up: merged HTTP answers vs the raw
Cassandra reads of the same rows, in one run.

It brings every service up as ``make up`` leaves them (Kafka, Cassandra, the
collector, the speed job, the platform's own serving, Airflow), loads a bench
keyspace with 31 days of 200 pages and the whole site up to now
(:mod:`bench.serving_data`: batch rows at the minute, hour and day grains up
to the boundary at the start of the previous hour, speed minutes after it),
starts a serving process of its own on that keyspace (``python -m serving
serve``, uvicorn workers), and a speed writer process that upserts the
current minute and the speed progress every few seconds, as the speed job
does. Then, phase by phase, from a load generator of its own (``--generators``: the Go
one of :mod:`bench.loadgen`, a small share of the two cores, and Python's asyncio):

- **timeseries**: one hour of minutes for one page straddling the boundary,
  at a fixed rate (open loop: latency counts from when a request was due, so
  a stall is not hidden) and at saturation (closed loop, many connections);
- **top-N**: the top 10 pages by views over the last 15 minutes, the last
  day and the last 30 days, at 50 requests/s and at saturation; the five
  slowest pages of the last minute; and the last day with a different start
  and ``n`` in every request (``uncached``: no two requests share an
  answer, so it measures the planner, the reads and the merges);
- **reach** of one page (a different one per request) over 30 days;
- **dashboard**: the dashboard page's four requests per refresh
  (``serving/static/dashboard.html``: site timeseries, site reach, top pages
  over the chosen range, slowest pages of the last minute) over its range
  choices (1 hour to 30 days), for 200 viewers refreshing every 3 s (267
  requests/s), at 2,000 requests/s and at saturation;
- **raw**: for each serving phase but the dashboard's, the partitions the planner
  reads (``serving.plan``), with the Python driver: no HTTP, merge or cache.

Figures (requests/s, p50, p99, max, errors, the share of shared answers, the load
average) are printed and written to ``.platform/artifacts/bench_serving.json``.

    .venv/bin/python -m bench.serving_latency                  # every phase, ~8 minutes
    .venv/bin/python -m bench.serving_latency --only top --seconds 10 --no-platform
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

from bench import loadgen
from bench.serving_data import PAGES, Layout, load, speed_writer
from bench.serving_data import questions as serving_questions
from core.settings import ServingSettings, Settings, child_env, load_settings
from platformctl import platform
from serving.timerange import to_ms

TOKEN = "bench-read-token"
_LENGTH = re.compile(rb"content-length: *(\d+)", re.IGNORECASE)
_HIT = b'"cache":{"hit":true'
_CLOSE = re.compile(rb"\r\nconnection: *close\r\n", re.IGNORECASE)


# -- HTTP load generator (a process of its own) ------------------------------------------------


async def _http_worker(host, port, requests, due, out) -> None:
    latencies, errors, hits = out
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
            body = await reader.readexactly(length)
            if head[9:12] != b"200":
                errors.append(head[:12].decode() + " " + body[:200].decode(errors="replace"))
            hits.append(_HIT in body)
            latencies.append(time.perf_counter() - intended)
            if _CLOSE.search(head):  # the connection's last request: open another
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
    finally:
        writer.close()


async def _drive(run_one, connections: int, rate: float | None, seconds: float, warmup: float):
    """Open loop at ``rate`` (None: closed loop); returns what the workers collected."""
    due: asyncio.Queue = asyncio.Queue()
    out: tuple[list, list, list] = ([], [], [])
    workers = [asyncio.ensure_future(run_one(due, out)) for _ in range(connections)]
    started = time.perf_counter()
    end = started + warmup + seconds
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
    return out, time.perf_counter() - started


def _summary(name: str, out: tuple[list, list, list], elapsed: float, warmup: float) -> dict:
    latencies, errors, hits = out
    skip = int(len(latencies) * warmup / elapsed)  # requests are roughly uniform in time
    kept = sorted(latencies[skip:])
    n = len(kept)
    if not n:
        return {"name": name, "requests": 0, "errors": len(errors), "first_error": errors[:1]}
    result = {
        "name": name,
        "requests": n,
        "rps": round(n / (elapsed - warmup), 1),
        "p50_ms": round(kept[n // 2] * 1000, 2),
        "p99_ms": round(kept[min(n - 1, int(n * 0.99))] * 1000, 2),
        "max_ms": round(kept[-1] * 1000, 2),
        "errors": len(errors),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    if hits:
        result["cache_hits"] = round(sum(hits[skip:]) / max(1, len(hits[skip:])), 3)
    if errors:
        result["first_error"] = errors[0]
    return result


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
        def one(due, out):
            return _http_worker(host, port, requests, due, out)

        return await _drive(one, connections, rate, seconds, warmup)

    out, elapsed = uvloop.run(main())
    return _summary(name, out, elapsed, warmup)


def _go_run(args: tuple) -> dict:
    """:func:`_http_run`'s phase, driven by the Go generator (:mod:`bench.loadgen`)."""
    *phase, program = args
    return loadgen.phase(program, TOKEN, *phase)


# -- raw Cassandra reads of the same partitions (a process of its own) ----------------------------


def _raw_run(args: tuple) -> dict:
    """The partitions the planner reads for each question, read with the driver: no HTTP,
    no merge, no cache. ``questions``: ``(kind, lo_ms, hi_ms, key)`` tuples."""
    name, settings_json, layout_now, questions, connections, rate, seconds, warmup = args
    import uvloop
    from cassandra.cluster import EXEC_PROFILE_DEFAULT
    from cassandra.query import tuple_factory

    from core.cassandra import connect
    from layout import GRAINS, ViewTables
    from serving.plan import key_reads, window_reads
    from serving.store import _await
    from views import view

    settings = Settings.model_validate_json(settings_json)
    layout = Layout(datetime.fromisoformat(layout_now))
    cluster, session = connect(settings.cassandra)
    profile = session.execution_profile_clone_update(
        EXEC_PROFILE_DEFAULT, row_factory=tuple_factory
    )
    keyspace = settings.cassandra.keyspace
    page = view("page_activity")
    batch = {g: ViewTables(page, keyspace, "batch", grain=g) for g in GRAINS}
    speed = ViewTables(page, keyspace, "speed")
    by_window = {
        ("batch", g): session.prepare(t.select_minute(["page_views"])) for g, t in batch.items()
    }
    by_window["speed", "minute"] = session.prepare(speed.select_minute(["page_views"]))
    slowest = session.prepare(speed.select_minute(["load_sketch"]))
    all_measures = [m.name for m in page.measures]
    by_key = {("batch", g): session.prepare(t.select_range(["visitors"])) for g, t in batch.items()}
    by_key["speed", "minute"] = session.prepare(speed.select_range(["visitors"]))
    series = {
        "batch": session.prepare(batch["minute"].select_range(all_measures)),
        "speed": session.prepare(speed.select_range(all_measures)),
    }
    boundary = to_ms(layout.boundary)
    version = int(layout.now.timestamp())
    days, day = {}, layout.first_day
    while day <= layout.boundary:
        days[day.date()] = version
        day += timedelta(days=1)
    calls_per_question = []
    for kind, lo, hi, key in questions:
        if kind == "top":
            reads = window_reads(lo, hi, boundary, days, 0, set(days))
            calls = [
                (
                    by_window[r.layer, r.grain],
                    (r.start, r.version) if r.layer == "batch" else (r.start,),
                )
                for r in reads
            ]
        elif kind == "slowest":
            calls = [(slowest, (lo,))]
        else:
            coarsest = "day" if kind == "reach" else "minute"
            reads = key_reads(lo, hi, boundary, days, 0, set(days), coarsest)
            chosen = (
                by_key if kind == "reach" else {(r.layer, "minute"): series[r.layer] for r in reads}
            )
            calls = [
                (
                    chosen[r.layer, r.grain],
                    (key, r.day, r.version, r.lo, r.hi)
                    if r.layer == "batch"
                    else (key, r.day, r.lo, r.hi),
                )
                for r in reads
            ]
        calls_per_question.append(calls)

    async def worker(due, out):
        latencies, errors, _ = out
        turn = random.randrange(len(calls_per_question))
        while True:
            intended = await due.get()
            if intended is None:
                return
            turn += 1
            calls = calls_per_question[turn % len(calls_per_question)]
            try:
                for i in range(0, len(calls), 256):
                    await asyncio.gather(
                        *(_await(session, s, p, profile) for s, p in calls[i : i + 256])
                    )
            except Exception as exc:
                errors.append(str(exc))
            latencies.append(time.perf_counter() - intended)

    async def main():
        return await _drive(worker, connections, rate, seconds, warmup)

    out, elapsed = uvloop.run(main())
    cluster.shutdown()
    result = _summary(name, out, elapsed, warmup)
    result["partitions_per_request"] = round(
        sum(len(c) for c in calls_per_question) / len(calls_per_question), 1
    )
    return result


def _in_process(target, args) -> dict:
    context = multiprocessing.get_context("spawn")
    with context.Pool(1) as pool:
        return pool.apply(target, (args,))


# -- the phases ------------------------------------------------------------------------------


def _every_worker_listens(port: int) -> bool:
    """Serving's ``/health`` answers, past ``starting``: connections opened before then would
    all land on the workers already listening (``core.workers``)."""
    import httpx

    try:
        return (
            httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json().get("error")
            != "starting"
        )
    except (httpx.HTTPError, ValueError):
        return False


def _phases(args, layout: Layout, settings: Settings, host: str, port: int) -> list:
    """``(target, arguments)`` per phase, serving then raw for each question."""
    questions = serving_questions(layout)
    c, s, w = args.connections, args.seconds, args.warmup
    sj, now = settings.model_dump_json(), layout.now.isoformat()
    phases = []

    def pair(what: str, rate: float | None, raw: bool = True) -> None:
        paths, raw_questions = questions[what]
        label = f"@{rate:g}" if rate else "max"
        http = (f"serving {what} {label}", host, port, paths, c, rate, s, w)
        for generator in args.generators:
            if generator == "go":
                phases.append((_go_run, (*http, args.loadgen)))
            else:
                phases.append((_http_run, http))
        if raw and raw_questions:
            phases.append(
                (_raw_run, (f"raw {what} {label}", sj, now, raw_questions, c, rate, s, w))
            )

    pair("ts-straddle", args.rate)
    pair("ts-straddle", None)
    pair("top-10 pages 15 min", None)
    pair("top-5 slowest 1 min", None)
    for what in ("top-10 pages 1 day", "top-10 pages 30 days", "reach 30 days"):
        pair(what, 50)
        pair(what, None)
    pair("top-N pages 1 day uncached", 50)
    pair("top-N pages 1 day uncached", None)
    pair("dashboard", 200 * 4 / 3, raw=False)
    pair("dashboard", 2000, raw=False)
    pair("dashboard", None, raw=False)
    return phases


# -- the run --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.serving_latency", description=__doc__)
    parser.add_argument("--rate", type=float, default=1000.0, help="timeseries rate (req/s)")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured seconds per phase")
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2, help="serving processes")
    parser.add_argument("--port", type=int, default=18090)
    parser.add_argument("--keyspace", default="bench_serving")
    parser.add_argument("--only", default="", help="run only phases whose name contains this")
    parser.add_argument("--no-platform", action="store_true", help="bring up Cassandra only")
    parser.add_argument(
        "--no-load", action="store_true", help="reuse the keyspace the last run loaded"
    )
    generators = "go,python" if loadgen.available() else "python"
    parser.add_argument("--generators", default=generators, help="each drives every phase")
    args = parser.parse_args(argv)
    args.generators = [g for g in args.generators.split(",") if g]

    base = load_settings()
    up = platform.up(base, ("cassandra",) if args.no_platform else platform.SERVICES)
    print(f"platform up: {sorted(up)}", flush=True)
    settings = base.model_copy(
        update={
            "cassandra": base.cassandra.model_copy(update={"keyspace": args.keyspace}),
            "serving": ServingSettings(
                **base.serving.model_dump()
                | {"port": args.port, "workers": args.workers, "api_tokens": {"bench": TOKEN}}
            ),
        }
    )
    loaded = settings.local.state_dir / "artifacts" / "bench_serving_layout.json"
    if args.no_load:
        layout = Layout(datetime.fromisoformat(json.loads(loaded.read_text())["now"]))
        counts: dict[str, int] = {}
    else:
        layout = Layout(datetime.now(UTC))
        print(f"loading {PAGES} pages and the site, 31 days up to {layout.now:%Y-%m-%d %H:%M}")
        started = time.monotonic()
        counts = load(settings, layout, progress=lambda text: print(text, flush=True))
        print(f"loaded in {time.monotonic() - started:.0f} s: {counts}", flush=True)
        loaded.parent.mkdir(parents=True, exist_ok=True)
        loaded.write_text(json.dumps({"now": layout.now.isoformat(), "keyspace": args.keyspace}))
    args.loadgen = loadgen.binary(settings.local.state_dir) if "go" in args.generators else None
    log = settings.local.state_dir / "logs" / "bench-serving.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "serving", "serve", "--instance", "bench"],
            env=child_env(settings),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    context = multiprocessing.get_context("spawn")
    report = context.Queue()
    phases = [
        p for p in _phases(args, layout, settings, "127.0.0.1", args.port) if args.only in p[1][0]
    ]
    budget = len(phases) * (args.seconds + args.warmup + 15) + 60
    writer = context.Process(
        target=speed_writer, args=((settings.model_dump_json(), 2.0, budget, report),)
    )
    results = []
    try:
        deadline = time.monotonic() + 60
        while not _every_worker_listens(args.port):
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"serving did not start; see {log}")
            time.sleep(0.2)
        writer.start()
        time.sleep(2)
        for target, phase in phases:
            result = _in_process(target, phase)
            results.append(result)
            print(json.dumps(result), flush=True)
    finally:
        os.killpg(server.pid, 15)
        server.wait(30)
        if writer.is_alive():
            writer.terminate()
        writer.join(10)
    _print(results)
    out = settings.local.state_dir / "artifacts" / "bench_serving.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    figures = {"args": vars(args), "counts": counts, "results": results}
    out.write_text(json.dumps(figures, indent=2, default=str))
    print(f"written to {out}")
    return 0


def _print(results: list[dict]) -> None:
    head = f"{'phase':<44} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}"
    print(f"\n{head} {'errors':>6} {'cached':>6}")
    for r in results:
        print(
            f"{r['name']:<44} {r.get('rps', 0):>8} {r.get('p50_ms', '-'):>8} "
            f"{r.get('p99_ms', '-'):>8} {r.get('max_ms', '-'):>8} {r['errors']:>6} "
            f"{r.get('cache_hits', '-'):>6}"
        )
    for r in results:
        if r.get("stalls"):
            listed = ", ".join(
                f"{s['at']} x{s['requests']} ({s['max_ms']:.0f} ms)" for s in r["stalls"]
            )
            print(f"stalls of {r['name']} (UTC, requests over 20 ms due within 50 ms): {listed}")
    by = {r["name"]: r for r in results}
    for r in results:
        what = r["name"].removeprefix("serving ")
        raw = by.get(f"raw {what}") if r["name"].startswith("serving ") else None
        if raw and r.get("rps") and raw.get("rps"):
            print(
                f"ratio serving/raw {what}: req/s {r['rps'] / raw['rps']:.2f}, "
                f"p50 {r['p50_ms'] / raw['p50_ms']:.2f}x, p99 {r['p99_ms'] / raw['p99_ms']:.2f}x"
            )


if __name__ == "__main__":
    sys.exit(main())
