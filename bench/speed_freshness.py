"""Speed-layer freshness under load, against a plain Spark read of the same topic.

Runs on the local platform (it brings Kafka and Cassandra up if needed), on a
bench-only topic, keyspace and checkpoints:

1. **speed layer**: the real job (``python -m speed_layer``, as ``platformctl``
   runs it) while events are produced at a fixed rate for a fixed time, rate
   stepped up until freshness p99 exceeds the target. Records are made by the
   collector's own intake (enriched, validated; one template per page, click
   and search, its id and times set at send time), event time = send time.
   **Freshness** is measured end to end, per view: every half second the
   bench reads each view's current-minute partitions from Cassandra and
   compares the measure's total with what it produced; the age of the
   oldest event not yet reflected is the view's lag at that moment (0 when
   all is reflected). Reported per step: p50/p99/max of the worst view's lag,
   the speed job's micro-batch durations, and its CPU (driver + JVM). Before
   the steps, a warm-up at the first rate (``--warmup-seconds``: 60 s, 180 s
   on the cluster) is reported but not counted: the job's first micro-batches
   with data start its Python workers and compile its hot code, once per job.
2. **ceiling**: a plain Spark streaming query (same session settings, same
   ``maxOffsetsPerTrigger``) that reads everything the steps produced and
   only counts records: events/s.

The result is the highest rate whose freshness p99 stayed within the
target, and its ratio to the ceiling. Figures are printed (JSON last) and
written to ``.platform/artifacts/bench_speed.json``; nothing is asserted.

    .venv/bin/python -m bench.speed_freshness --rates 1000,2000,3000,5000 --step-seconds 120

``--modes local,standalone`` runs the steps twice in one run: in ``local[2]``, then on a
Spark standalone cluster of this machine (a master and two workers; the job's CPU then
includes the workers' executors). ``--modes local,contract`` compares the speed parse of
the fields the views read with the parse of the whole contract, in ``local[2]`` both.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from bench.procs import group_cpu_seconds
from bench.speed_log import fold_stages, percentile
from bench.speed_traffic import Produced, _minutes_back, produce_at, templates
from core.settings import (
    PROJECT_ROOT,
    KafkaSettings,
    LakeSettings,
    Settings,
    child_env,
    load_settings,
)
from layout import PointerTables
from platformctl import platform

ARTIFACT = PROJECT_ROOT / ".platform" / "artifacts" / "bench_speed.json"
# (view, measure, table): what each view's current minute must add up to.
_MEASURES = (
    ("site_activity", "events", "speed_site_activity_by_minute"),
    ("page_activity", "page_views", "speed_page_activity_by_minute"),
    ("clicks", "clicks", "speed_clicks_by_minute"),
    ("search_terms", "searches", "speed_search_terms_by_minute"),
)


def sample_lag(session, keyspace: str, produced: Produced, lock: threading.Lock) -> float:
    """The worst view's lag (s) now: the age of its oldest produced event not yet reflected."""
    now_wall = datetime.now(UTC)
    now = time.monotonic()
    worst = 0.0
    for _view, measure, table in _MEASURES:
        for window in _minutes_back(now_wall, 3):
            rows = session.execute(
                f"SELECT {measure} FROM {keyspace}.{table} WHERE window_start = %s", (window,)
            )
            seen = sum(getattr(r, measure) or 0 for r in rows)
            key = window.strftime("%Y-%m-%dT%H:%M")
            with lock:
                oldest = produced.oldest_unreflected(key, measure, seen)
            if oldest is not None:
                worst = max(worst, now - oldest)
    return worst


def _batch_durations(session, keyspace: str, seen: set[int], into: list[int]) -> None:
    """Durations of the micro-batches not seen yet (one query: every view row has its batch)."""
    for row in session.execute(
        PointerTables(keyspace).select_progress(("batch_id", "batch_duration_ms"))
    ):
        if row.batch_id is not None and row.batch_id not in seen:
            seen.add(row.batch_id)
            if row.batch_duration_ms is not None:
                into.append(row.batch_duration_ms)


# -- the two sides ----------------------------------------------------------------------------


def run_steps(
    settings: Settings,
    rates: list[float],
    seconds: float,
    target_s: float,
    also_cpu_of: tuple[int, ...] = (),
    warmup_s: float = 0.0,
) -> dict:
    """The stepped rates on the real job, after ``warmup_s`` of traffic at the first rate
    that is reported but not counted; ``also_cpu_of``: process groups whose CPU counts
    as the job's too (a standalone cluster's workers, which run its executors)."""
    from core.cassandra import connect

    def cpu_seconds() -> float:
        return group_cpu_seconds(job.pid) + sum(group_cpu_seconds(g) for g in also_cpu_of)

    made = templates()
    run = uuid.uuid4().hex[:8]
    log = Path(settings.lake.checkpoint_root).parent / "speed.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        job = subprocess.Popen(
            [sys.executable, "-m", "speed_layer", "--instance", f"bench-{run}"],
            env=child_env(settings),
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=handle,
            start_new_session=True,
        )
    cluster, session = connect(settings.cassandra)
    keyspace = settings.cassandra.keyspace

    produced, lock = Produced(), threading.Lock()

    def step_at(rate: float, seconds: float) -> dict:
        producer = threading.Thread(
            target=produce_at,
            args=(settings, made, rate, seconds, produced, lock, run, sequence),
            daemon=True,
        )
        lags: list[float] = []
        batches: list[int] = []
        seen_batches: set[int] = set()
        _batch_durations(session, keyspace, seen_batches, [])
        log_offset = log.stat().st_size
        cpu_before, wall_before, first = cpu_seconds(), time.monotonic(), sequence[0]
        producer.start()
        warmup = min(15.0, seconds / 4)  # the first batches of a step plan its rate's work
        while producer.is_alive():
            time.sleep(0.5)
            lag = sample_lag(session, keyspace, produced, lock)
            if time.monotonic() - wall_before > warmup:
                lags.append(lag)
            _batch_durations(session, keyspace, seen_batches, batches)
            if job.poll() is not None:
                raise RuntimeError(f"the speed job exited:\n{log.read_text()[-3000:]}")
        cpu = cpu_seconds() - cpu_before
        wall = time.monotonic() - wall_before
        step = {
            "rate": rate,
            "events": produced.events - first,  # the sequence counts the whole run's
            "freshness_p50_s": round(percentile(lags, 0.5), 2),
            "freshness_p99_s": round(percentile(lags, 0.99), 2),
            "freshness_max_s": round(max(lags, default=float("nan")), 2),
            "batch_ms_p50": percentile(batches, 0.5),
            "batch_ms_max": max(batches, default=None),
            "batches": len(batches),
            "speed_cpu_cores": round(cpu / wall, 2),
            **fold_stages(log, log_offset),
        }
        _settle(session, keyspace, produced, lock)
        return step

    steps = []
    warm: dict | None = None
    sequence = [0]
    try:
        _wait_for_queries(session, keyspace, job, log)
        if warmup_s > 0:
            # The job's first micro-batches with data start its Python workers and compile
            # its hot code (seconds each): reported, not counted in the steps.
            warm = step_at(rates[0], warmup_s)
            print(f"[bench] warm-up {json.dumps(warm)}", file=sys.stderr, flush=True)
        for rate in rates:
            step = step_at(rate, seconds)
            steps.append(step)
            print(f"[bench] {json.dumps(step)}", file=sys.stderr, flush=True)
            if step["freshness_p99_s"] > target_s:
                break
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        try:
            job.wait(120)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
        cluster.shutdown()
    return {"steps": steps, "warmup": warm, "events": sequence[0]}


def _wait_for_queries(session, keyspace: str, job: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if job.poll() is not None:
            raise RuntimeError(f"the speed job exited:\n{log.read_text()[-3000:]}")
        try:
            rows = list(session.execute(PointerTables(keyspace).select_progress(())))
        except Exception:  # the table appears when the job starts
            rows = []
        if len(rows) >= len(_MEASURES):
            return
        time.sleep(1)
    raise RuntimeError(f"the speed job reported no progress in 180 s:\n{log.read_text()[-3000:]}")


def _settle(session, keyspace: str, produced: Produced, lock: threading.Lock) -> None:
    """Let the job catch up between steps, so one step's backlog does not count in the next."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and sample_lag(session, keyspace, produced, lock) > 0:
        time.sleep(1)


def ceiling(settings: Settings, events: int) -> dict:
    """A plain streaming read of the topic that only counts records: events/s.

    Same session settings as the speed layer, over everything the steps
    produced, in ten micro-batches or more; the first one is left out.
    """
    from core.spark import build_spark_session

    spark = build_spark_session(settings, app_name="bench-plain-read")
    counted = [0]

    def count(batch, _batch_id) -> None:
        counted[0] += batch.count()

    query = (
        spark.readStream.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max(10_000, events // 10))
        .load()
        .writeStream.foreachBatch(count)
        .trigger(availableNow=True)
        .option("checkpointLocation", f"{settings.lake.checkpoint_root}/plain-read")
        .start()
    )
    query.awaitTermination()
    # The first micro-batch plans the query and warms the JVM; the rest is the steady read.
    steady = [p for p in query.recentProgress if _field(p, "numInputRows")][1:]
    rows = sum(_field(p, "numInputRows") for p in steady)
    busy_s = sum(_field(p, "batchDuration") for p in steady) / 1000
    spark.stop()
    return {"events": counted[0], "events_per_s": round(rows / busy_s) if busy_s else None}


def _field(progress, name: str):
    return getattr(progress, name) if hasattr(progress, name) else progress[name]


MODES = {
    "local": "local[2], each record parsed into the fields the views read (the default)",
    "contract": "local[2], each record parsed into every field of the contract (before)",
    "executors": "local[2], each micro-batch folded on the executors (before)",
    "standalone": "a master and two workers on this machine (started for the run if not up)",
}
"""Where and how the speed job runs in a mode of ``--modes``."""

WARMUP_S = {"local": 60.0, "contract": 60.0, "executors": 60.0, "standalone": 180.0}
"""Seconds of traffic before the steps, by mode. The cluster's executors are JVMs of their
own with Python workers of their own, and warm up for longer: after 60 s, its first step's
micro-batches still took 2.1 s (p50), against 1.5 s one step later (docs/benchmarks.md)."""


def _run_mode(
    settings: Settings,
    mode: str,
    rates: list[float],
    seconds: float,
    target_s: float,
    warmup_s: float,
) -> dict:
    """The stepped rates with the job as ``mode`` says (:data:`MODES`)."""
    if mode == "local":
        return run_steps(settings, rates, seconds, target_s, warmup_s=warmup_s)
    if mode not in MODES:
        raise SystemExit(f"unknown mode {mode!r}: one of {', '.join(MODES)}")
    update: dict = {
        "lake": settings.lake.model_copy(
            update={"checkpoint_root": f"{settings.lake.checkpoint_root}-{mode}"}
        ),
        # Views of their own, from the end of the log: the earlier mode's events are
        # the plain read's, not this job's backlog.
        "cassandra": settings.cassandra.model_copy(
            update={"keyspace": f"{settings.cassandra.keyspace}_{mode}"}
        ),
        "speed": settings.speed.model_copy(
            update={"starting_offsets": "latest"}
            | ({"parse": "contract"} if mode == "contract" else {})
            | ({"fold": "executors"} if mode == "executors" else {})
        ),
    }
    if mode == "standalone":
        update["spark"] = settings.spark.model_copy(
            update={
                "cluster": "standalone",
                "master": f"spark://127.0.0.1:{settings.spark.master_port}",
            }
        )
    other = settings.model_copy(update=update)
    from core.cassandra import connect, ensure_keyspace

    cluster, session = connect(other.cassandra)
    ensure_keyspace(session, other.cassandra.keyspace, other.cassandra.replication)
    started: tuple[str, ...] = ()
    try:
        workers: tuple[int, ...] = ()
        if mode == "standalone":
            already = {s.name for s in platform.status(other) if s.running}
            started = tuple(n for n in platform.SPARK_CLUSTER if n not in already)
            platform.up(other, platform.SPARK_CLUSTER)
            pids = [platform.processes(other)[n].pid() for n in platform.SPARK_CLUSTER[1:]]
            workers = tuple(p for p in pids if p is not None)
        return run_steps(other, rates, seconds, target_s, workers, warmup_s=warmup_s)
    finally:
        if started:
            platform.down(other, started)
        session.execute(f"DROP KEYSPACE IF EXISTS {other.cassandra.keyspace}", timeout=120)
        cluster.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rates", default="1000,2000,3000,5000,7000", help="events/s steps")
    parser.add_argument("--step-seconds", type=float, default=120)
    parser.add_argument("--target-s", type=float, default=5.0, help="freshness p99 target")
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        default=None,
        help="traffic at the first rate before the steps, reported but not counted (the "
        "job's first micro-batches start its Python workers and compile its code); 0: none; "
        f"default: {WARMUP_S['local']:.0f} s in local mode, {WARMUP_S['standalone']:.0f} s "
        "on the cluster",
    )
    parser.add_argument(
        "--modes",
        default="local",
        help="how the job runs, in turn: "
        + "; ".join(f"{name}: {what}" for name, what in MODES.items())
        + " (e.g. local,contract)",
    )
    args = parser.parse_args(argv)
    rates = [float(r) for r in args.rates.split(",")]

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"speed-{run}"
    settings = base.model_copy(
        update={
            "kafka": KafkaSettings(
                **(
                    base.kafka.model_dump()
                    | {"events_topic": f"bench.speed.{run}", "dlq_topic": f"bench.speed.dlq.{run}"}
                )
            ),
            "cassandra": base.cassandra.model_copy(update={"keyspace": f"bench_speed_{run}"}),
            "lake": LakeSettings(
                root=str(root / "lake"), checkpoint_root=str(root / "checkpoints")
            ),
            "speed": base.speed.model_copy(update={"pipelines": ["web_events"]}),
        }
    )
    from confluent_kafka.admin import AdminClient

    from core.cassandra import connect, ensure_keyspace
    from ingest.topics import ensure_topics, platform_topics

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(session, settings.cassandra.keyspace, settings.cassandra.replication)
    print(
        f"[bench] speed layer on topic {settings.kafka.events_topic} "
        f"({settings.kafka.partitions} partitions), steps {rates} events/s x "
        f"{args.step_seconds:.0f}s, target freshness p99 <= {args.target_s}s",
        file=sys.stderr,
        flush=True,
    )
    modes = args.modes.split(",")
    runs: dict[str, dict] = {}
    try:
        for mode in modes:
            warmup_s = args.warmup_seconds
            if warmup_s is None:
                warmup_s = WARMUP_S.get(mode, WARMUP_S["local"])
            runs[mode] = _run_mode(
                settings, mode, rates, args.step_seconds, args.target_s, warmup_s
            )
        plain = ceiling(settings, sum(r["events"] for r in runs.values()))
    finally:
        admin.delete_topics([settings.kafka.events_topic, settings.kafka.dlq_topic])
        session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}")
        cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)

    result: dict = {
        "target_freshness_p99_s": args.target_s,
        "plain_read_events_per_s": plain["events_per_s"],
        "cores": os.cpu_count(),
        "speed_settings": settings.speed.model_dump(),
        "shuffle_partitions": settings.spark.shuffle_partitions,
    }
    for mode, speed in runs.items():
        within = [s for s in speed["steps"] if s["freshness_p99_s"] <= args.target_s]
        best = max((s["rate"] for s in within), default=0.0)
        figures = {
            "warmup": speed["warmup"],
            "steps": speed["steps"],
            "best_rate_within_target": best,
            "ratio_to_plain_read": (
                round(best / plain["events_per_s"], 3) if best and plain["events_per_s"] else 0.0
            ),
        }
        if mode == modes[0]:
            result |= figures  # the first mode's figures stay where earlier runs had them
        result.setdefault("modes", {})[mode] = figures
        print(f"[{mode}]")
        print(f"{'rate/s':>8} {'p50 s':>7} {'p99 s':>7} {'max s':>7} {'batch ms':>9} {'cores':>6}")
        for s in speed["steps"]:
            print(
                f"{s['rate']:>8.0f} {s['freshness_p50_s']:>7.2f} {s['freshness_p99_s']:>7.2f} "
                f"{s['freshness_max_s']:>7.2f} {s['batch_ms_p50']:>9} {s['speed_cpu_cores']:>6.2f}"
            )
        print(
            f"[bench] {mode}: best rate with freshness p99 <= {args.target_s}s: {best:,.0f} "
            f"events/s; plain read {plain['events_per_s'] or 0:,.0f} events/s; "
            f"ratio {figures['ratio_to_plain_read']:.0%}"
        )
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
