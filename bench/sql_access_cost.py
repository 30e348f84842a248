"""What identity, grants and the audit cost one SQL statement: the platform's SQL server
against a plain Spark Connect server of the same Spark, in one run.

Run it with the platform up (``make up``; the lake need not hold data)::

    .venv/bin/python -m bench.sql_access_cost [--repeats 60]

It starts two servers on free ports, one after the other's start:

- **guarded**: the platform's SQL server (:func:`bench.sql_server.start_server`: its guard
  built from this checkout, the platform's keyspace), which identifies every call's
  bearer, binds the session to its identity, checks each named view against the
  identity's grants, bounds its statements and queues an audit record per statement;
- **plain**: a Spark Connect server of the same pyspark, local mode, no guard and no token
  (``--plain``, a child process).

An analyst token is issued for the run (``platformctl access issue`` does the same) and
revoked at the end. Each statement is run once to warm up, then ``--repeats`` times each
way, the ways in turn so that the machine's load falls on all of them alike, each on a
long-lived session of its own:

- **plain**: the plain server;
- **analyst**: the guarded server, as the analyst (identified, bounded, audited);
- **service**: the guarded server, as ``sql-service`` (identified and audited, not
  bounded).

Statements: ``SELECT 1`` (the fixed cost of a statement), an aggregate over ``range`` (a
Spark job), and, on the guarded server only, a query naming a granted view as the analyst
and as the service (what the grant check adds to a view, beside an identity that reads
every view). Printed: p50 and p99 of each way, and the guard's added p50 per statement
(analyst - plain) and ratio; written to ``.platform/artifacts/bench_sql_access_cost.json``.

The added end-to-end figure is the whole guarded server's: the read-only parser and
check rule, the time limit, the metrics listener, and analysts' tasks in executor JVMs of
their own below the driver's priority (the plain server runs them in its driver), as well
as identity, grants and the audit; on a machine as busy as the platform makes it, it moves
by tens of milliseconds between runs. What access itself costs is therefore also read
from the driver, which times each part as it runs it (``wap_sql_access_seconds_total``
and ``wap_sql_access_runs_total`` by part: identify, bind, admit, grants, audit): their
sum over the measured rounds, per statement.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.sql_server import _free_port, server_settings, start_server
from core.settings import PROJECT_ROOT, load_settings

__all__ = ["main"]

STATEMENTS = {
    "select_1": "SELECT 1 AS x",
    "range_agg": "SELECT count(*) AS n, max(id) AS m FROM range(0, 100000, 1, 2)",
}
VIEW_STATEMENT = "SELECT count(*) AS n FROM serving_page_activity"
"""A granted view (web_events', read by the web team), as analyst and as service."""


def _plain_server(port: int) -> None:
    """The plain server, in this (child) process, until it is stopped."""
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-plain-connect")
        .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .config("spark.connect.grpc.binding.address", "127.0.0.1")
        .config("spark.connect.grpc.binding.port", str(port))
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.range(1).collect()
    print("ready", flush=True)
    try:
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
    finally:
        spark.stop()


def _start_plain(port: int, log: Path) -> subprocess.Popen:
    out = open(log, "w")  # noqa: SIM115 - the child's log, kept open for it
    process = subprocess.Popen(
        [sys.executable, "-m", "bench.sql_access_cost", "--plain", str(port)],
        cwd=PROJECT_ROOT,
        env=os.environ | {"PYTHONWARNINGS": "ignore"},
        stdout=subprocess.PIPE,
        stderr=out,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != "ready":
        raise RuntimeError(f"The plain Spark Connect server did not start; see {log}")
    return process


def _access_figures(health_url: str) -> dict[str, tuple[float, float]]:
    """Per part of access, (runs, seconds) the driver has counted so far."""
    text = httpx.get(f"{health_url}/metrics", timeout=30).text
    figures: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for name, index in (
                ("wap_sql_access_runs_total", 0),
                ("wap_sql_access_seconds_total", 1),
            ):
                if sample.name == name:
                    figures.setdefault(sample.labels["part"], [0.0, 0.0])[index] = sample.value
    return {part: (runs, seconds) for part, (runs, seconds) in figures.items()}


def _session(url: str) -> Any:
    from serving.connect.remote import remote_session

    return remote_session(url)


def _percentiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p99_ms": round(p99 * 1000, 2)}


def _measure(ways: dict[str, Callable[[], Any]], repeats: int) -> dict[str, dict[str, float]]:
    for run in ways.values():
        run()  # warm
    seconds: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, run in ways.items():
            began = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - began)
    return {name: _percentiles(values) for name, values in seconds.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_access_cost", description=__doc__)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--plain", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.plain:
        _plain_server(args.plain)
        return 0

    from access.store import TokenStore
    from core.cassandra import connect

    base = load_settings()
    settings = server_settings(base, "bench-sql-access")
    state = settings.local.state_dir
    analyst = f"bench-analyst-{uuid.uuid4().hex[:6]}"
    cluster, cql = connect(settings.cassandra)
    store = TokenStore(cql, settings.cassandra.keyspace)
    store.create()
    token = store.issue(analyst, ["web-analytics"]).text
    guarded = plain = None
    sessions: list[Any] = []
    try:
        guarded, start_s, _ = start_server(settings, state)
        print(f"[start] guarded SQL server healthy in {start_s:.1f} s", flush=True)
        port = _free_port()
        plain = _start_plain(port, state / "plain-connect.log")
        print(f"[start] plain Spark Connect server on {port}", flush=True)
        base_url = settings.sql.url().split(";token=", 1)[0]
        as_analyst = _session(f"{base_url};token={token}")
        as_service = _session(settings.sql.url())
        on_plain = _session(f"sc://localhost:{port}")
        sessions += [as_analyst, as_service, on_plain]
        _wait_served(as_analyst)
        health_url = f"http://127.0.0.1:{settings.sql.health_port}"
        results: dict[str, Any] = {}
        in_driver: dict[str, Any] = {}
        for name, sql in STATEMENTS.items():
            results[name] = _measure(
                {
                    "plain": lambda sql=sql: on_plain.sql(sql).collect(),
                    "analyst": lambda sql=sql: as_analyst.sql(sql).collect(),
                    "service": lambda sql=sql: as_service.sql(sql).collect(),
                },
                args.repeats,
            )
            print(f"[{name}] {json.dumps(results[name])}", flush=True)
        results["granted_view"] = _measure(
            {
                "analyst": lambda: as_analyst.sql(VIEW_STATEMENT).collect(),
                "service": lambda: as_service.sql(VIEW_STATEMENT).collect(),
            },
            args.repeats,
        )
        print(f"[granted_view] {json.dumps(results['granted_view'])}", flush=True)
        before = _access_figures(health_url)
        for _ in range(args.repeats):
            as_analyst.sql(VIEW_STATEMENT).collect()
        in_driver = _per_statement(before, _access_figures(health_url), args.repeats)
        print(f"[in_driver] {json.dumps(in_driver)}", flush=True)
    finally:
        from serving.connect.remote import close_session

        for session in sessions:
            close_session(session)
        for process in (guarded, plain):
            if process is not None:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(120)
        store.revoke(analyst)
        cluster.shutdown()
    _print(results, in_driver, args.repeats)
    artifact = PROJECT_ROOT / ".platform" / "artifacts" / "bench_sql_access_cost.json"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    document = {"repeats": args.repeats, "results": results, "in_driver": in_driver}
    artifact.write_text(json.dumps(document, indent=2))
    return 0


def _per_statement(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]], statements: int
) -> dict[str, dict[str, float]]:
    """Per part, its runs and microseconds per statement between two readings."""
    parts = {}
    for part, (runs, seconds) in sorted(after.items()):
        runs_before, seconds_before = before.get(part, (0.0, 0.0))
        parts[part] = {
            "runs": round((runs - runs_before) / statements, 2),
            "us": round((seconds - seconds_before) * 1e6 / statements, 1),
        }
    parts["all"] = {"runs": 0.0, "us": round(sum(p["us"] for p in parts.values()), 1)}
    return parts


def _wait_served(session: Any, timeout_s: float = 30) -> None:
    """Until the guarded server knows the issued token (it re-reads every access.refresh_s)."""
    began = time.monotonic()
    while True:
        try:
            session.sql("SELECT 1").collect()
            return
        except Exception:
            if time.monotonic() - began > timeout_s:
                raise
            time.sleep(0.5)


def _print(results: dict[str, Any], in_driver: dict[str, Any], repeats: int) -> None:
    print(f"\nper statement, {repeats} runs each way (ms)")
    print(f"{'statement':<14}{'way':<9}{'p50':>9}{'p99':>9}")
    for name, ways in results.items():
        for way, figures in ways.items():
            print(f"{name:<14}{way:<9}{figures['p50_ms']:>9.2f}{figures['p99_ms']:>9.2f}")
    print("\nthe guard's added p50 per statement (analyst - plain):")
    for name in STATEMENTS:
        ways = results[name]
        added = ways["analyst"]["p50_ms"] - ways["plain"]["p50_ms"]
        ratio = ways["analyst"]["p50_ms"] / ways["plain"]["p50_ms"]
        print(f"  {name:<12}{added:>+8.2f} ms  ({ratio:.2f}x plain)")
    view = results["granted_view"]
    extra = view["analyst"]["p50_ms"] - view["service"]["p50_ms"]
    print(f"  grants on a view (analyst - service): {extra:+.2f} ms")
    print(f"\naccess in the driver, per statement naming a granted view ({repeats} statements):")
    for part, figures in in_driver.items():
        runs = f"{figures['runs']:g} runs" if part != "all" else ""
        print(f"  {part:<10}{figures['us']:>9.1f} us  {runs}")


if __name__ == "__main__":
    raise SystemExit(main())
