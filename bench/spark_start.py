"""A local Spark driver's start: with the platform's class archive against plain Spark.

Every process that runs Spark here (the speed job, the batch step server, the SQL
server, a batch step under ``spark-submit``, each test worker) starts a driver JVM, and
on two cores its class loading is a real share of a short job. Each run is a new
process that builds the platform's session and does the class archive's workload
(:func:`platformctl.class_archive.workload`: Delta writes and reads, a sketch
aggregation, JSON, a streaming query) once:

- **archive**: as the platform starts drivers (``core.spark.build_spark_session`` maps
  ``.platform/spark/classes.jsa``, which ``make install`` wrote);
- **raw**: the same session and work with no archive (plain Spark).

Runs alternate (raw, archive, raw, ...) so both see the same machine. Wall seconds to the
session and to the end of the work, and the CPU seconds of the process group, are printed
per run and as medians (JSON last); nothing is asserted.

    .venv/bin/python -m bench.spark_start --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from bench.procs import group_cpu_seconds
from core.settings import PROJECT_ROOT, child_env, load_settings
from core.spark import local_class_archive, local_spark_jars

_RUN = """
import json, sys, tempfile, time
from pathlib import Path
started = time.monotonic()
from core.settings import load_settings
from core.spark import build_spark_session
from platformctl.class_archive import workload
spark = build_spark_session(load_settings(), app_name="bench-spark-start")
session = time.monotonic() - started
with tempfile.TemporaryDirectory() as root:
    workload(spark, Path(root))
print(json.dumps({"session_s": session, "work_s": time.monotonic() - started - session}))
sys.stdout.flush()
sys.stdin.readline()  # the bench reads the group's CPU while the JVM still runs
"""


def run_once(archive: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-no-archive-") as empty:
        settings = load_settings()
        env = child_env(settings)
        if not archive:  # a state folder with no archive; the same jars, named explicitly
            env["WAP_SPARK__JARS"] = json.dumps(local_spark_jars(settings.local.state_dir))
            env["WAP_LOCAL__STATE_DIR"] = empty
        return _timed(env)


def _timed(env: dict[str, str]) -> dict:
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _RUN],
        cwd=PROJECT_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    line = proc.stdout.readline()
    total = time.monotonic() - started
    cpu = group_cpu_seconds(proc.pid)
    proc.communicate("\n", timeout=120)
    if not line.startswith("{"):
        sys.exit(f"the run failed (exit {proc.returncode})")
    return json.loads(line) | {"total_s": total, "cpu_s": cpu}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each (default 3)")
    args = parser.parse_args()
    archive = local_class_archive(load_settings().local.state_dir)
    if not archive.exists():
        sys.exit(f"No class archive at {archive}: run `make install` first.")
    runs: dict[str, list[dict]] = {"raw": [], "archive": []}
    for i in range(args.runs):
        for name in runs:
            figures = run_once(archive=name == "archive")
            runs[name].append(figures)
            shown = {k: round(v, 2) for k, v in figures.items()}
            print(f"run {i + 1} {name:7s} {shown}", flush=True)
    medians = {
        name: {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]}
        for name, rs in runs.items()
    }
    ratio = medians["raw"]["total_s"] / medians["archive"]["total_s"]
    print(
        f"median raw {medians['raw']['total_s']} s, archive {medians['archive']['total_s']} s "
        f"(raw / archive {ratio:.2f}); CPU {medians['raw']['cpu_s']} -> "
        f"{medians['archive']['cpu_s']} s; cores {os.cpu_count()}"
    )
    print(json.dumps({"medians": medians, "raw_over_archive": round(ratio, 2)}))


if __name__ == "__main__":
    main()
