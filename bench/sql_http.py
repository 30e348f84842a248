"""``POST /v1/sql`` against the same statements run directly over one long-lived Spark
Connect session, in one run: what answering SQL over HTTP costs.

Run it with the platform up and data in the lake (``make demo`` first)::

    .venv/bin/python -m bench.sql_http [--repeats 20]

It starts a SQL server of its own (:func:`bench.sql_server.start_server`: its own
ports and state, the platform's lake and keyspace, its guard built from this checkout)
and a serving process of its own on it (``python -m serving serve``: one worker, its own
port and token). The statements: the dashboard's four questions written as SQL over the
``serving_*`` views (site time series by hour and reach over a day, the top pages of the
day, the slowest pages of the last minute: ``serving/static/dashboard.html`` asks them of
the REST routes) and every named query of ``docs/sql.md``. Each statement is run once to
warm up, then ``--repeats`` times each way, the ways in turn so that the machine's load
falls on all of them alike:

- **direct**: over one Spark Connect session this process opens once, as the API's worker
  runs a statement (named parameters, ``LIMIT n+1``, Arrow);
- **direct, new session**: the same, each time in a new session on one channel, released
  after (:class:`serving.connect.remote.SessionSource`, where the checkout has it);
- **http**: ``POST /v1/sql`` with the same statement and parameters, one client, one
  connection (keep-alive).

Printed per statement and over all: p50 and p99 of each way and the ratio http/direct of
both; written to ``.platform/artifacts/bench_sql_http.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.sql_server import server_settings, start_server
from core.settings import PROJECT_ROOT, ServingSettings, Settings, child_env, load_settings
from serving.connect.examples import doc_queries

__all__ = ["DASHBOARD", "main"]

TOKEN = "bench-sql-read-token"
_RANGE = "window_start >= to_timestamp(:start) AND window_start < to_timestamp(:end)"
DASHBOARD = {
    "site_series": "SELECT date_trunc('HOUR', window_start) AS bucket, sum(events) AS events, "
    "sum(page_views) AS page_views, hll_sketch_estimate(hll_union_agg(visitors)) AS visitors "
    f"FROM serving_site_activity WHERE {_RANGE} GROUP BY 1 ORDER BY 1",
    "site_reach": "SELECT hll_sketch_estimate(hll_union_agg(visitors)) AS visitors "
    f"FROM serving_site_activity WHERE {_RANGE}",
    "top_pages_day": "SELECT path, sum(page_views) AS views FROM serving_page_activity "
    f"WHERE {_RANGE} GROUP BY path ORDER BY views DESC, path LIMIT 10",
    "slowest_pages": "SELECT path, "
    "kll_sketch_get_quantile_double(kll_merge_agg_double(load_sketch), 0.95) AS p95_ms "
    "FROM serving_page_activity WHERE window_start >= to_timestamp(:recent) "
    "GROUP BY path ORDER BY p95_ms DESC NULLS LAST, path LIMIT 5",
}
"""The dashboard page's four questions per refresh, as SQL (its range: the last day)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _statements() -> dict[str, tuple[str, dict[str, str]]]:
    """Name -> (statement, parameters): the dashboard's over a day, the docs' over 30 days."""
    now = datetime.now(UTC)
    end = (now + timedelta(hours=1)).isoformat()
    day = {"start": (now - timedelta(days=1)).isoformat(), "end": end}
    recent = {"recent": (now - timedelta(minutes=1)).isoformat()}
    month = {"start": (now - timedelta(days=30)).isoformat(), "end": end}
    dashboard = {
        f"dashboard {name}": (sql, recent if ":recent" in sql else day)
        for name, sql in DASHBOARD.items()
    }
    docs = {f"docs {name}": (sql, month) for name, sql in doc_queries().items()}
    return dashboard | docs


def _quantiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1), "p99_ms": round(p99 * 1000, 1)}


def _ways(settings: Settings, http: httpx.Client, max_rows: int) -> dict[str, Callable]:
    """Way name -> ``run(statement, params)``, each raising on an error."""
    from serving.connect import remote

    spark = remote.remote_session(settings.sql.url())
    ways: dict[str, Callable] = {
        "direct": lambda sql, params: spark.sql(sql, args=params).limit(max_rows + 1).toArrow()
    }
    source_class = getattr(remote, "SessionSource", None)
    if source_class is not None:
        source = source_class(settings.sql.url())

        def new_session(sql: str, params: dict) -> Any:
            session = source.open()
            try:
                return session.sql(sql, args=params).limit(max_rows + 1).toArrow()
            finally:
                source.release(session)

        ways["direct, new session"] = new_session

    def post(sql: str, params: dict) -> Any:
        answer = http.post("/v1/sql", json={"sql": sql, "params": params, "max_rows": max_rows})
        if answer.status_code != 200:
            raise RuntimeError(f"POST /v1/sql answered {answer.status_code}: {answer.text}")
        return answer

    ways["http"] = post
    return ways


def _measure(ways: dict[str, Callable], repeats: int) -> dict[str, dict[str, dict]]:
    results: dict[str, dict[str, dict]] = {}
    for name, (sql, params) in _statements().items():
        for run in ways.values():
            run(sql, params)  # warm: the first answer of a statement plans and reads cold
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        for _ in range(repeats):
            for way, run in ways.items():
                began = time.perf_counter()
                run(sql, params)
                seconds[way].append(time.perf_counter() - began)
        results[name] = {way: _quantiles(s) for way, s in seconds.items()}
        results[name]["all"] = seconds  # type: ignore[assignment]
        print(f"[{name}] " + json.dumps({w: results[name][w] for w in ways}), flush=True)
    return results


def _start_serving(settings: Settings, log: Path) -> subprocess.Popen:
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "serving", "serve", "--instance", "bench-sql"],
            cwd=PROJECT_ROOT,
            env=child_env(settings),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"The serving process exited; see {log}")
        try:
            health = httpx.get(f"http://127.0.0.1:{settings.serving.port}/health", timeout=5)
            if health.json().get("error") != "starting":
                return process
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGTERM)
    raise RuntimeError(f"The serving process did not answer /health within 120 s; see {log}")


def _run(settings: Settings, args: argparse.Namespace) -> dict[str, dict]:
    log = settings.local.state_dir / "logs" / "bench-sql-http.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    process = _start_serving(settings, log)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    base_url = f"http://127.0.0.1:{settings.serving.port}"
    try:
        with httpx.Client(base_url=base_url, headers=headers, timeout=120) as http:
            return _measure(_ways(settings, http, args.max_rows), args.repeats)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_http", description=__doc__)
    parser.add_argument("--repeats", type=int, default=20, help="measured runs per way")
    parser.add_argument("--max-rows", type=int, default=1000)
    args = parser.parse_args(argv)
    base = load_settings()
    own = server_settings(base, "bench-sql-http")
    server, start_s, health = start_server(own, own.local.state_dir)
    try:
        if not health.get("silver_versions"):
            raise SystemExit("No silver in the lake yet: run `make demo` first.")
        print(f"[start] SQL server healthy in {start_s:.1f} s", flush=True)
        serving = base.serving.model_dump() | {
            "port": _free_port(),
            "workers": 1,
            "api_tokens": {"bench": TOKEN},
        }
        settings = base.model_copy(update={"sql": own.sql, "serving": ServingSettings(**serving)})
        results = _run(settings, args)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(120)
    overall = _print(results)
    out = base.local.state_dir / "artifacts" / "bench_sql_http.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "overall": overall, "results": results}))
    print(f"written to {out}")
    return 0


def _cells(figures: dict[str, dict], ways: list[str]) -> str:
    return "".join(f"{figures[w]['p50_ms']:>22.1f} / {figures[w]['p99_ms']:>7.1f}" for w in ways)


def _print(results: dict[str, dict]) -> dict[str, dict]:
    ways = [w for w in next(iter(results.values())) if w != "all"]
    print(f"\n{'statement':<30}" + "".join(f"{w + ' p50/p99 ms':>32}" for w in ways) + "   ratio")
    pooled: dict[str, list[float]] = {w: [] for w in ways}
    for name, figures in results.items():
        cells = _cells(figures, ways)
        ratio = figures["http"]["p50_ms"] / figures["direct"]["p50_ms"]
        print(f"{name:<30}{cells}{ratio:>7.2f}x")
        for way in ways:
            pooled[way] += figures["all"][way]
    overall = {way: _quantiles(seconds) for way, seconds in pooled.items()}
    cells = _cells(overall, ways)
    print(f"{'all statements':<30}{cells}")
    medians = {w: [results[n][w]["p50_ms"] for n in results] for w in ways}
    for way in ways:
        if way != "direct":
            ratios = [a / b for a, b in zip(medians[way], medians["direct"], strict=True)]
            ratio = statistics.median(ratios)
            print(f"{way}/direct at p50, median over the statements: {ratio:.2f}x")
    return overall


if __name__ == "__main__":
    raise SystemExit(main())
