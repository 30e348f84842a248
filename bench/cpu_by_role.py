"""Where a command's CPU goes: every process on the machine, summed by its role.

    .venv/bin/python -m bench.cpu_by_role -- make test
    .venv/bin/python -m bench.cpu_by_role --every 1 -- .venv/bin/python -m pytest tests/x.py

Runs the command, reads ``/proc`` every ``--every`` seconds while it runs, and prints,
once it ends, the CPU seconds of each role (:func:`role`): Spark drivers by what started
them (a test worker, a speed job, a step server, the SQL server), Spark's Python workers,
Cassandra, Kafka, Airflow, the test workers' own Python, and the rest; then how busy the
machine's cores were over the same span (``/proc/stat``). Processes the command did not
start count from the first sample. A process that lives less than one period is missed.
The figures are the platform's and its tests' whole cost on the machine, with the
services the command only talks to; ``time`` counts only the command's own children.
Nothing is asserted; the exit code is the command's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from bench.procs import all_stats

__all__ = ["role"]

_TICK = os.sysconf("SC_CLK_TCK")

_STARTERS = (
    ("-m speed_layer", "speed job"),
    ("-m batch_layer serve", "batch step server"),
    ("-m batch_layer", "batch step (spark-submit)"),
    ("serving.connect", "SQL server"),
    ("exec(eval(sys.stdin", "test worker"),
    ("-m pytest", "test worker"),
)
_SERVICES = (
    ("CassandraDaemon", "Cassandra"),
    ("net.openhft", "Cassandra"),
    ("kafka.Kafka", "Kafka"),
    ("org.apache.spark.executor", "Spark executors (standalone)"),
    ("org.apache.spark.deploy.master", "Spark master and workers (standalone)"),
    ("org.apache.spark.deploy.worker", "Spark master and workers (standalone)"),
    ("pyspark.daemon", "Spark's Python workers"),
    ("pyspark.worker", "Spark's Python workers"),
    ("airflow", "Airflow"),
    ("chrom", "browser (notebook tests)"),
)


def _started_by(parent: str) -> str:
    return next((name for mark, name in _STARTERS if mark in parent), "another process")


def _launcher(cmdline: str) -> bool:
    """``spark-submit`` or ``spark-class`` (which ``exec`` the JVM), however they are run."""
    return any(
        os.path.basename(word) in ("spark-submit", "spark-class") for word in cmdline.split()[:3]
    )


def role(cmdline: str, parent: str = "") -> str:
    """The role of a process, from its command line and its parent's.

    >>> role("java -Xms2048m -ea -da:net.openhft... org.apache.cassandra.service.CassandraDaemon")
    'Cassandra'
    >>> role("/usr/lib/jvm/java/bin/java -cp /v/pyspark/jars/* org.apache.spark.deploy.SparkSubmit "
    ...      "pyspark-shell", "/v/bin/python -m batch_layer serve")
    'Spark driver of a batch step server'
    >>> role("env bash /v/bin/spark-submit --conf x pyspark-shell", "/v/bin/python -m speed_layer")
    'Spark driver of a speed job'
    >>> role("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))")
    'test workers (Python)'
    >>> role("/v/bin/python -m pyspark.daemon pyspark.worker")
    "Spark's Python workers"
    >>> role("", "kthreadd")
    'kernel, or ended before its first sample'
    """
    if not cmdline:
        return "kernel, or ended before its first sample"
    for mark, name in _SERVICES:
        if mark in cmdline:
            return name
    if "java" in cmdline.split(" ", 1)[0] and "pyspark" in cmdline:
        return f"Spark driver of a {_started_by(parent)}"
    if _launcher(cmdline):  # Spark's launcher script, before it becomes the driver's JVM
        return f"Spark driver of a {_started_by(parent)}"
    starter = _started_by(cmdline)
    if starter == "test worker":
        return "test workers (Python)"
    if starter != "another process":
        return f"{starter} (Python)"
    return "other: " + " ".join(os.path.basename(w) for w in cmdline.split()[:3])[:60]


@dataclass
class _Seen:
    cmdline: str
    parent: str
    base: float
    cpu: float


def _cmdline(pid: int | str) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as raw:
            return raw.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _busy() -> tuple[float, float]:
    """(busy, total) jiffies of every core since boot."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def _sample(seen: dict[tuple[int, int], _Seen], started_tick: float) -> None:
    for pid, fields in all_stats():
        ppid, start = int(fields[1]), int(fields[19])
        cpu = (int(fields[11]) + int(fields[12])) / _TICK
        key = (pid, start)
        if key not in seen:
            base = cpu if start < started_tick else 0.0
            seen[key] = _Seen(_cmdline(pid), _cmdline(ppid), base, cpu)
        else:
            process = seen[key]
            process.cpu = cpu
            if _launcher(process.cmdline):  # the script has become the JVM since
                process.cmdline = _cmdline(pid) or process.cmdline


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    with open("/proc/uptime") as uptime:
        started_tick = float(uptime.read().split()[0]) * _TICK
    busy0, total0 = _busy()
    started = time.monotonic()
    seen: dict[tuple[int, int], _Seen] = {}
    child = subprocess.Popen(command)
    while child.poll() is None:
        _sample(seen, started_tick)
        time.sleep(args.every)
    _sample(seen, started_tick)
    span = time.monotonic() - started
    busy1, total1 = _busy()
    by_role: Counter[str] = Counter()
    count: Counter[str] = Counter()
    for process in seen.values():
        name = role(process.cmdline, process.parent)
        by_role[name] += process.cpu - process.base
        count[name] += 1
    total = sum(by_role.values())
    print(f"\n[cpu_by_role] {' '.join(command)}: {span:.0f} s, {total:.0f} CPU s", file=sys.stderr)
    print(
        f"[cpu_by_role] cores busy {100 * (busy1 - busy0) / max(total1 - total0, 1):.0f}% "
        f"of {os.cpu_count()} over the span",
        file=sys.stderr,
    )
    for name, cpu in by_role.most_common():
        if cpu >= 0.5:
            share = 100 * cpu / max(total, 1e-9)
            print(f"{cpu:9.0f} s {share:5.1f}% {count[name]:5d} processes  {name}", file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
