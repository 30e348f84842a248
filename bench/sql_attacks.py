"""The SQL server under statements that take the cores: how long another session's
``SELECT 1`` and a small aggregate take during each, against the same with no statement.

Run it with the platform up (``make up``: the server's catalog refresh reads Cassandra)::

    .venv/bin/python -m bench.sql_attacks [--tree DIR] [--time-limit-s 30]

It starts a SQL server of its own under its supervisor (its own ports and state
folder, ``python -m serving.connect --supervise``) from this checkout, or from
the source tree ``--tree`` (another checkout, e.g. ``git worktree add /tmp/before
<commit>``: the same measurement on older code), waits until ``/health`` says
``ok``, then, for each statement of :data:`ATTACKS` (``none`` first: only the
measurement), runs it in one Spark Connect session while a second runs ``SELECT
1`` every 0.5 s and a third ``spark.range(0, 1_000_000, 1, 4).count()`` every
second, from the statement's start until ``--after-s`` after it ended. Printed per
statement: how it ended, ``SELECT 1``'s and the aggregate's p50 and max (and the
ratio of the p50 to the one with no statement), the measurements that failed,
and the restarts the supervisor logged. A server restarted by a statement is
waited for before the next one.
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
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from core.settings import PROJECT_ROOT, SqlSettings, child_env, load_settings

__all__ = ["ATTACKS", "main"]

ATTACKS = {
    "none": None,
    "regex": "SELECT count(*) FROM range(0, 2, 1, 2) WHERE regexp_like("
    "concat(repeat('a', 100000), cast(id AS STRING)), '.*.*.*!')",
    "cross_join": "SELECT count(*) FROM range(200000) a CROSS JOIN range(200000) b "
    "WHERE a.id + b.id = -1",
    "huge_value": "SELECT length(repeat('x', 900000000))",
    "many_partitions": "SELECT max(sha2(CAST(id AS STRING), 256)) "
    "FROM range(0, 4000000000, 1, 20000)",
    "time_limit": "SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(0, 4000000000, 1, 8)",
}
"""Each statement that held the cores (or the server), by name; ``none``: measure only."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:160]


def _timed(run: Any) -> tuple[float, str | None]:
    began = time.monotonic()
    try:
        run()
        return time.monotonic() - began, None
    except Exception as error:  # counted and printed
        return time.monotonic() - began, _first_line(error)


class _Server:
    """A supervised SQL server of this benchmark, from ``tree``."""

    def __init__(self, tree: Path, time_limit_s: float) -> None:
        base = load_settings()
        self.state = base.local.state_dir / "bench-sql-attacks"
        self.state.mkdir(parents=True, exist_ok=True)
        sql = SqlSettings(
            **base.sql.model_dump()
            | {
                "port": _free_port(),
                "health_port": _free_port(),
                "time_limit_s": time_limit_s,
                "refresh_s": 300.0,
            }
        )
        spark = base.spark
        if spark.jars is None:
            from core.spark import local_spark_jars

            spark = spark.model_copy(update={"jars": local_spark_jars(base.local.state_dir)})
        # A machine busy with other work starts a server slowly: give it time before the
        # supervisor counts failed health checks (a restart there is not a statement's).
        local = base.local.model_copy(
            update={
                "state_dir": self.state,
                "start_timeout_s": max(900.0, base.local.start_timeout_s),
            }
        )
        self.settings = base.model_copy(update={"sql": sql, "spark": spark, "local": local})
        self.log = self.state / "sql.log"
        env = child_env(self.settings) | {"PYTHONPATH": str(tree)}
        with self.log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "serving.connect", "--supervise"],
                cwd=tree,
                env=env,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )

    def restarts(self) -> int:
        return self.log.read_text(errors="replace").count("sql.supervisor.restarting")

    def wait_ok(self, timeout_s: float = 900) -> float:
        """Seconds until ``/health`` answers ``ok``."""
        began = time.monotonic()
        url = f"http://127.0.0.1:{self.settings.sql.health_port}/health"
        while time.monotonic() - began < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"The SQL server's supervisor exited; see {self.log}")
            try:
                if httpx.get(url, timeout=30).json().get("status") == "ok":
                    return time.monotonic() - began
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(1)
        raise RuntimeError(f"The SQL server did not answer within {timeout_s} s; see {self.log}")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)


def _measure(url: str, statement: str | None, measure_s: float, after_s: float) -> dict:
    """``statement`` in one session while two others measure: their times and errors."""
    from serving.connect.remote import close_session, remote_session

    # No exit hook: pyspark's retries for minutes once the server is stopped.
    hog, probe, small = (remote_session(url) for _ in range(3))
    probe.sql("SELECT 1").collect()
    small.range(0, 1_000_000, 1, 4).count()
    runs: dict[str, list[tuple[float, str | None, float]]] = {"select1": [], "small": []}
    done = threading.Event()
    started = time.monotonic()

    def every(name: str, run: Any, period_s: float) -> None:
        while not done.is_set():
            began = time.monotonic()
            runs[name].append((*_timed(run), round(began - started, 1)))
            done.wait(max(0.0, period_s - (time.monotonic() - began)))

    threads = [
        threading.Thread(target=every, args=("select1", probe.sql("SELECT 1").collect, 0.5)),
        threading.Thread(target=every, args=("small", small.range(0, 1_000_000, 1, 4).count, 1)),
    ]
    for thread in threads:
        thread.start()
    outcome: tuple[float, str | None] = (0.0, None)
    if statement is None:
        done.wait(measure_s)
    else:
        outcome = _timed(lambda: hog.sql(statement).collect())
        done.wait(after_s)
    done.set()
    for thread in threads:
        thread.join()
    for session in (hog, probe, small):
        close_session(session)
    return {"statement": outcome, **runs}


def _figures(runs: list[tuple[float, str | None, float]]) -> dict[str, Any]:
    """Count, failures, p50 and max of the answered runs, and when the slowest began (seconds
    after the statement was sent)."""
    answered = [(seconds, at) for seconds, error, at in runs if error is None]
    slowest = max(answered, default=(None, None))
    return {
        "n": len(runs),
        "failed": len(runs) - len(answered),
        "p50": round(statistics.median(s for s, _ in answered), 3) if answered else None,
        "max": round(slowest[0], 3) if answered else None,
        "max_at_s": slowest[1],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sql_attacks", description=__doc__)
    parser.add_argument("--tree", type=Path, default=PROJECT_ROOT, help="the server's sources")
    parser.add_argument("--time-limit-s", type=float, default=30.0)
    parser.add_argument("--after-s", type=float, default=40.0)
    parser.add_argument("--measure-s", type=float, default=40.0, help="with no statement")
    parser.add_argument("--only", nargs="*", choices=list(ATTACKS), help="these statements")
    args = parser.parse_args(argv)
    server = _Server(args.tree.resolve(), args.time_limit_s)
    results: dict[str, dict] = {}
    try:
        print(f"[start] {args.tree}: ok in {server.wait_ok():.0f} s", flush=True)
        for name, statement in ATTACKS.items():
            if args.only and name not in args.only and name != "none":
                continue
            restarts = server.restarts()
            measured = _measure(server.settings.sql.url(), statement, args.measure_s, args.after_s)
            waited = server.wait_ok()
            seconds, error = measured["statement"]
            results[name] = {
                "ended": "-" if statement is None else (error or "answered"),
                "seconds": round(seconds, 1),
                "select1": _figures(measured["select1"]),
                "small": _figures(measured["small"]),
                "restarts": server.restarts() - restarts,
                "ok_again_s": round(waited, 1),
            }
            print(f"[{name}] {json.dumps(results[name])}", flush=True)
    finally:
        server.stop()
    _print(results)
    return 0


def _print(results: dict[str, dict]) -> None:
    base = results["none"]
    print(
        f"\n{'statement':<12}{'ran':>7}  {'SELECT 1 p50/max':>18}{'x':>6}  "
        f"{'aggregate p50/max':>18}{'x':>6}{'failed':>8}{'restarts':>9}  ended"
    )
    for name, row in results.items():
        cells = []
        for key in ("select1", "small"):
            figures, p50 = row[key], base[key]["p50"]
            ratio = figures["p50"] / p50 if figures["p50"] and p50 else float("nan")
            cells.append(f"{figures['p50']!s:>8}/{figures['max']!s:<9}{ratio:>6.1f}")
        failed = row["select1"]["failed"] + row["small"]["failed"]
        print(
            f"{name:<12}{row['seconds']:>6}s  {cells[0]}  {cells[1]}{failed:>8}"
            f"{row['restarts']:>9}  {row['ended'][:70]}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
