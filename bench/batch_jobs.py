"""Where a small batch run's Spark jobs and CPU go: per step, the jobs by the line that started
them, beside a plain Kafka -> Parquet job over the same records, in one warm driver.

The suite and the hourly DAGs run many small runs, whose cost is the fixed work per step
(Delta log reads and snapshots, file listings, the gates' collects), not the events. It brings
Kafka and Cassandra up if they are down (bronze reads the speed layer's watermarks from
Cassandra); measure with the whole platform up (``make up``) as the docs' figures were::

    .venv/bin/python -m bench.batch_jobs [--events 300] [--rounds 2]

Each round produces ``--events`` simulated events to a topic of its own and runs
``bronze, silver, check_silver, gold, check_gold`` over them into a fresh lake (as
``python -m batch_layer`` runs them: :func:`batch_layer.runner.run_step`), after one
warm-up round; the plain job reads the same offsets into Parquet. Printed per step: wall
seconds, the JVM's CPU seconds and its Spark jobs, and after each round the JVM's class
and code memory (:func:`bench.meter.jvm_memory`); then, over the measured rounds, the
jobs by call site (PySpark names a job after the Python line that started it, and a job
Delta starts inside that call after the same line), the most frequent first. With
``--profile``, each measured step is recorded with the JDK's Flight Recorder
(:mod:`bench.jvm_profile`) and its JVM samples are printed by what the JVM was doing
(planning, code generation, the Delta log, Parquet, ...) and by method. Written to
``.platform/artifacts/bench_batch_jobs.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import uuid
from collections import Counter
from typing import Any

from bench.batch_throughput import _produce, _topic_settings, _with_lake, run_raw, simulated_day
from bench.jvm_profile import ACTIVITIES, OTHER, Profiler
from bench.meter import Meter, jvm_memory
from core.settings import PROJECT_ROOT, load_settings
from platformctl import platform

__all__ = ["main"]

STEPS = ("bronze", "silver", "check_silver", "gold", "check_gold")


def _call_sites(spark: Any, first: int, last: int) -> Counter[str]:
    """The jobs ``first+1..last`` by the name of their first stage (their call site)."""
    tracker = spark.sparkContext.statusTracker()
    sites: Counter[str] = Counter()
    for job in range(first + 1, last + 1):
        info = tracker.getJobInfo(job)
        stages = sorted(info.stageIds) if info else []
        stage = tracker.getStageInfo(stages[0]) if stages else None
        sites[_short(stage.name) if stage else "(forgotten by the tracker)"] += 1
    return sites


def _short(name: str) -> str:
    """A stage name with the project's root cut from its path."""
    return name.replace(str(PROJECT_ROOT) + "/", "")


def _max_job(spark: Any) -> int:
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None) or [-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_jobs", description=__doc__)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2, help="measured rounds (after a warm-up)")
    parser.add_argument("--top", type=int, default=25, help="call sites printed per step")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--profile", action="store_true", help="record each measured step's JVM (Flight Recorder)"
    )
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient

    from batch_layer.runner import run_step
    from core.spark import build_spark_session
    from ingest.topics import ensure_topics, platform_topics
    from pipelines import collector_pipeline

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"batch-jobs-{run}"
    admin = AdminClient(base.kafka.client_config())
    spark = build_spark_session(base, app_name="bench-batch-jobs")
    meter = Meter(spark)
    profiler = Profiler(spark) if args.profile else None
    pipeline = collector_pipeline()
    topics: list[str] = []
    rounds: list[dict[str, Any]] = []
    sites: dict[str, Counter[str]] = {step: Counter() for step in (*STEPS, "raw")}
    try:
        for n in range(args.rounds + 1):
            label = "warm-up" if n == 0 else f"round {n}"
            settings = _topic_settings(base, f"bench.jobs.{run}.{n}")
            ensure_topics(admin, platform_topics(settings.kafka))
            topics += [settings.kafka.events_topic, settings.kafka.dlq_topic]
            end = _produce(simulated_day(args.events, args.seed + n), settings)
            settings = _with_lake(settings, root / str(n))
            figures: dict[str, Any] = {}
            before = _max_job(spark)
            figures["raw"] = run_raw(spark, settings, end, root / str(n) / "raw", meter)
            if n:
                sites["raw"] += _call_sites(spark, before, _max_job(spark))
            for step in STEPS:
                before = _max_job(spark)
                recorded = profiler.record(step) if profiler and n else contextlib.nullcontext()
                with recorded, meter.measure(figures.setdefault(step, {})):
                    run_step(spark, settings, step, pipeline, f"jobs-{n}", None)
                if n:
                    sites[step] += _call_sites(spark, before, _max_job(spark))
            figures["jvm_memory"] = jvm_memory(spark)
            print(f"[bench] {label}: " + json.dumps(_line(figures)), flush=True)
            print(f"[bench] {label}, JVM memory: " + json.dumps(figures["jvm_memory"]), flush=True)
            if n:
                rounds.append(figures)
    finally:
        meter.stop()
        if profiler:
            profiler.close()
        spark.stop()
        if topics:
            admin.delete_topics(topics)
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "events": args.events,
        "rounds": rounds,
        "call_sites": {step: dict(found.most_common()) for step, found in sites.items()},
    }
    if profiler:
        result["jvm_samples"] = {step: dict(found) for step, found in profiler.samples.items()}
        result["jvm_methods"] = {
            step: dict(found.most_common(args.top)) for step, found in profiler.methods.items()
        }
        result["jvm_callers"] = {
            step: dict(found.most_common(args.top)) for step, found in profiler.callers.items()
        }
    _print(result, args.top)
    artifact = PROJECT_ROOT / ".platform" / "artifacts" / "bench_batch_jobs.json"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text(json.dumps(result, indent=2))
    return 0


def _line(figures: dict[str, Any]) -> dict[str, Any]:
    return {
        step: {k: f.get(k) for k in ("seconds", "jobs", "jvm_cores")}
        for step, f in figures.items()
        if step != "jvm_memory"
    }


def _print(result: dict[str, Any], top: int) -> None:
    rounds = result["rounds"]
    print(f"\n{result['events']} events, {len(rounds)} measured rounds (per round, the mean)")
    print(f"{'step':<14}{'seconds':>9}{'JVM CPU-s':>11}{'jobs':>7}")
    totals = [0.0, 0.0, 0.0]
    for step in ("raw", *STEPS):
        seconds = sum(r[step]["seconds"] for r in rounds) / len(rounds)
        cpu = sum(r[step]["seconds"] * r[step]["jvm_cores"] for r in rounds) / len(rounds)
        jobs = sum(r[step]["jobs"] for r in rounds) / len(rounds)
        if step != "raw":
            totals = [totals[0] + seconds, totals[1] + cpu, totals[2] + jobs]
        print(f"{step:<14}{seconds:>9.2f}{cpu:>11.2f}{jobs:>7.0f}")
    print(f"{'five steps':<14}{totals[0]:>9.2f}{totals[1]:>11.2f}{totals[2]:>7.0f}")
    memory = rounds[-1]["jvm_memory"]
    print("\nthe driver JVM after the last round (MiB used; classes): " + json.dumps(memory))
    for step, found in result["call_sites"].items():
        if step == "raw":
            continue
        print(f"\n{step}: jobs by call site, over {len(rounds)} rounds")
        for site, count in list(found.items())[:top]:
            print(f"  {count:>4}  {site}")
    if "jvm_samples" in result:
        _print_profile(result["jvm_samples"], result["jvm_methods"], top)
        _print_most(result["jvm_callers"], "callers in Spark, Delta, Hadoop or Parquet", top)


def _print_profile(
    samples: dict[str, dict[str, int]], methods: dict[str, dict[str, int]], top: int
) -> None:
    """The share of each step's JVM samples by activity, and the methods most sampled."""
    columns = {**samples, "five steps": dict(_summed(samples))}
    print("\nJVM samples by activity, % of each step's (Flight Recorder, measured rounds)")
    print(f"{'activity':<26}" + "".join(f"{step:>13}" for step in columns))
    for activity in [a for a, _ in ACTIVITIES] + [OTHER]:
        shares = [100 * c.get(activity, 0) / max(1, sum(c.values())) for c in columns.values()]
        print(f"{activity:<26}" + "".join(f"{share:>12.1f}%" for share in shares))
    print(f"{'samples':<26}" + "".join(f"{sum(c.values()):>13}" for c in columns.values()))
    _print_most(methods, "methods", top)


def _summed(by_step: dict[str, dict[str, int]]) -> Counter[str]:
    """Every step's counts added up."""
    every: Counter[str] = Counter()
    for found in by_step.values():
        every.update(found)
    return every


def _print_most(by_step: dict[str, dict[str, int]], what: str, top: int) -> None:
    print(f"\nthe {top} {what} most sampled, five steps")
    for name, count in _summed(by_step).most_common(top):
        print(f"  {count:>6}  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
