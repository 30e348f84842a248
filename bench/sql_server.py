"""The SQL server: its start time and memory, and the docs' queries through Spark Connect
against the same queries on a plain local Spark session, in one run.

Run it with the platform up and data in the lake (``make demo`` first)::

    .venv/bin/python -m bench.sql_server [--repeats 5]

Phases, each printed as it ends:

1. **start**: a second SQL server (its own ports, the platform's lake and
   keyspace) is started; the time until its ``/health`` answers 200 (Spark
   up, guard loaded, catalog built) and the resident memory of its process
   group (the Python driver and its JVM) then and after the queries.
2. **connect**: each named query of ``docs/sql.md`` over Spark Connect from
   this process (``sc://localhost:<port>``), ``--repeats`` times: the first
   (cold) and the median of the others.
3. **raw**: the same queries on a plain local SparkSession in a child
   process, over the same view definitions (:class:`serving.connect.host.SqlServer`
   builds them in that session), parameters as literals in the text: the
   engine without the protocol and the guard.

The ratio connect/raw per query is the price of serving SQL remotely.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.procs import group_rss_mb
from core.settings import (
    PROJECT_ROOT,
    Settings,
    SqlSettings,
    child_env,
    load_settings,
)
from serving.connect.examples import doc_queries

__all__ = ["main", "server_settings", "start_server"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _params() -> dict[str, str]:
    now = datetime.now(UTC)
    return {
        "start": (now - timedelta(days=30)).isoformat(),
        "end": (now + timedelta(hours=1)).isoformat(),
    }


def _timed(run, repeats: int) -> dict[str, float]:
    seconds = []
    for _ in range(repeats):
        began = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - began)
    warm = seconds[1:] or seconds
    return {"cold_s": round(seconds[0], 3), "median_s": round(statistics.median(warm), 3)}


def start_server(settings: Settings, state: Path) -> tuple[subprocess.Popen, float, dict]:
    """``python -m serving.connect`` on ``settings`` (its log in ``state``), once its
    ``/health`` answers 200: the process (a group of its own), seconds to healthy, health."""
    env = child_env(settings)
    log = open(state / "sql-bench.log", "w")  # noqa: SIM115 - the child's log, kept open for it
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "serving.connect"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    health = f"http://127.0.0.1:{settings.sql.health_port}/health"
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"The SQL server exited; see {state / 'sql-bench.log'}")
        try:
            answer = httpx.get(health, timeout=5)
            if answer.status_code == 200:
                return process, time.perf_counter() - began, answer.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.2)


def server_settings(base: Settings, name: str) -> Settings:
    """``base`` with a SQL server of its own: free ports, its state under ``<state>/<name>``
    (its guard built there from this checkout), the platform's lake, keyspace and jars."""
    state = base.local.state_dir / name
    state.mkdir(parents=True, exist_ok=True)
    sql = SqlSettings(**base.sql.model_dump() | {"port": _free_port(), "health_port": _free_port()})
    settings = base.model_copy(
        update={"sql": sql, "local": base.local.model_copy(update={"state_dir": state})}
    )
    if base.spark.jars is None:
        from core.spark import local_spark_jars

        jars = local_spark_jars(base.local.state_dir)
        settings = settings.model_copy(
            update={"spark": settings.spark.model_copy(update={"jars": jars})}
        )
    return settings


def _connect_phase(settings: Settings, repeats: int, params: dict) -> dict[str, dict]:
    from pyspark.sql.connect.session import SparkSession

    spark = SparkSession.builder.remote(settings.sql.url()).create()
    results = {}
    try:
        for name, sql in doc_queries().items():
            results[name] = _timed(lambda sql=sql: spark.sql(sql, args=params).collect(), repeats)
            print(f"[connect] {name}: {results[name]}", flush=True)
    finally:
        spark.stop()
    return results


def _raw_phase(repeats: int, params: dict) -> dict[str, dict]:
    """In this (child) process: a plain local session, the same views, the same queries."""
    from core.spark import build_spark_session
    from serving.connect.host import SqlServer

    settings = load_settings()
    spark_settings = settings.spark.model_copy(update={"driver_memory": settings.sql.driver_memory})
    spark = build_spark_session(
        settings.model_copy(update={"spark": spark_settings}), app_name="bench-sql-raw"
    )
    server = SqlServer(settings, spark)
    try:
        server.refresh()
    finally:
        server.close()
    results = {}
    for name, sql in doc_queries().items():
        # Literals in the text: with Delta's parser a plain session cannot bind parameters
        # (delta-io/delta#7640; the SQL server's guard works around it).
        text = re.sub(r":(\w+)", lambda m: f"'{params[m.group(1)]}'", sql)
        results[name] = _timed(lambda text=text: spark.sql(text).collect(), repeats)
    spark.stop()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_server", description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    params = _params()
    if args.raw:
        print(json.dumps(_raw_phase(args.repeats, params)))
        return 0

    base = load_settings()
    settings = server_settings(base, "bench-sql")
    state = settings.local.state_dir
    process, start_s, health = start_server(settings, state)
    rss_started = group_rss_mb(process.pid)
    print(
        f"[start] healthy in {start_s:.1f} s; RSS {rss_started} MB; "
        f"{len(health.get('views', []))} views; silver versions {health.get('silver_versions')}",
        flush=True,
    )
    if not health.get("silver_versions"):
        print("[start] no silver yet: run `make demo` first for the events queries", flush=True)
    try:
        connect = _connect_phase(settings, args.repeats, params)
        rss_after = group_rss_mb(process.pid)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(120)
    raw_env = child_env(settings)
    done = subprocess.run(
        [sys.executable, "-m", "bench.sql_server", "--raw", "--repeats", str(args.repeats)],
        cwd=PROJECT_ROOT,
        env=raw_env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"The raw phase failed:\n{done.stderr[-3000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    _print(start_s, rss_started, rss_after, connect, raw)
    return 0


def _print(start_s: float, rss_started: float, rss_after: float, connect: dict, raw: dict) -> None:
    print(f"\nSQL server: healthy in {start_s:.1f} s; RSS (Python driver + JVM) {rss_started} MB")
    print(f"at start, {rss_after} MB after the queries\n")
    print(f"{'query':<22}{'connect cold':>14}{'connect':>10}{'raw cold':>10}{'raw':>8}{'ratio':>8}")
    for name, figures in connect.items():
        base: dict[str, Any] = raw[name]
        ratio = figures["median_s"] / base["median_s"] if base["median_s"] else float("nan")
        print(
            f"{name:<22}{figures['cold_s']:>13.3f}s{figures['median_s']:>9.3f}s"
            f"{base['cold_s']:>9.3f}s{base['median_s']:>7.3f}s{ratio:>7.2f}x"
        )


if __name__ == "__main__":
    raise SystemExit(main())
