"""Two pipelines live at once: freshness of each, and what the second one costs.

Web events (the collector's records, as ``bench/speed_freshness.py`` makes them) and
checkout orders (the checkout service's records) are produced at the same rate, each
to its own bench topic, for a fixed time, while the speed layer streams both. Freshness
is measured end to end per pipeline, as in ``bench/speed_freshness.py``: every half
second each view's current minutes are read from Cassandra and compared with what was
produced; the age of the oldest event not yet reflected is that pipeline's lag.

Two layouts, one after the other, on the same machine in one run:

- ``shared``: one ``python -m speed_layer`` streaming both pipelines (the default
  deployment): its CPU and resident memory, total; ``shared-fair``: the same with each
  pipeline in a FAIR scheduler pool of its own (``speed.scheduler``);
- ``separate``: one ``python -m speed_layer --pipeline P`` per pipeline: each
  process's CPU and memory, which is each pipeline's own cost.

Figures are printed (JSON last) and written to
``.platform/artifacts/bench_pipelines.json``; nothing is asserted.

    .venv/bin/python -m bench.pipelines_freshness --rate 2000 --seconds 90
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
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from bench.procs import group_cpu_seconds, group_rss_mb
from bench.speed_log import percentile
from bench.speed_traffic import Produced, _minutes_back, produce_at, templates
from core.settings import (
    PROJECT_ROOT,
    KafkaSettings,
    LakeSettings,
    Settings,
    child_env,
    load_settings,
)
from pipelines import pipeline
from platformctl import platform

ARTIFACT = PROJECT_ROOT / ".platform" / "artifacts" / "bench_pipelines.json"
CHECKOUTS = pipeline("checkouts")
# (measure, table) per pipeline: what its view's current minutes must add up to.
MEASURES = {
    "web_events": (("events", "speed_site_activity_by_minute"),),
    "checkouts": (("orders", "speed_orders_by_currency_by_minute"),),
}


def produce_orders(
    settings: Settings, rate: float, seconds: float, produced: Produced, lock: threading.Lock
) -> None:
    """``rate`` completed orders/s for ``seconds`` (event time = send time), as the checkout
    service produces them (JSON, keyed by buyer, idempotent, ``acks=all``)."""
    from confluent_kafka import Producer

    producer = Producer(
        {**settings.kafka.client_config(), "enable.idempotence": True, "acks": "all"}
        | {"linger.ms": 20}
    )
    topic = CHECKOUTS.topic_of(settings)
    run = uuid.uuid4().hex[:8]
    tick, sent, started = 0.01, 0, time.monotonic()
    running: dict[str, int] = defaultdict(int)
    while (elapsed := time.monotonic() - started) < seconds:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")[:-6] + "Z"
        minute = stamp[:16]
        while sent < rate * (elapsed + tick):
            buyer = f"buyer-{sent % 997:04d}"
            price = 1000 + sent % 5000
            event = {
                "event_id": f"{run}-{sent:012d}",
                "source_id": "checkout-service",
                "type": "order_completed",
                "order_id": f"o-{run}-{sent}",
                "buyer_id": buyer,
                "amount_minor": price,
                "currency": ("EUR", "USD", "GBP")[sent % 3],
                "items": [{"sku": f"sku-{sent % 50}", "quantity": 1, "unit_price_minor": price}],
                "timestamp": stamp,
                "receivedAt": stamp,
            }
            while True:
                try:
                    producer.produce(topic, value=json.dumps(event).encode(), key=buyer.encode())
                    break
                except BufferError:
                    producer.poll(0.01)
            sent += 1
            running[minute] += 1
        producer.poll(0)
        mark = time.monotonic()
        with lock:
            totals = produced.totals[(minute, "orders")]
            if not totals or totals[-1] != running[minute]:
                produced.times[(minute, "orders")].append(mark)
                totals.append(running[minute])
            produced.events = sent
        time.sleep(max(0.0, started + elapsed + tick - time.monotonic()))
    producer.flush(60)


def lag_of(session, keyspace: str, name: str, produced: Produced, lock: threading.Lock) -> float:
    """The pipeline's lag now (s): the age of its oldest produced event not yet reflected."""
    now_wall, now, worst = datetime.now(UTC), time.monotonic(), 0.0
    for measure, table in MEASURES[name]:
        for window in _minutes_back(now_wall, 3):
            rows = session.execute(
                f"SELECT {measure} FROM {keyspace}.{table} WHERE window_start = %s", (window,)
            )
            seen = sum(getattr(r, measure) or 0 for r in rows)
            with lock:
                oldest = produced.oldest_unreflected(
                    window.strftime("%Y-%m-%dT%H:%M"), measure, seen
                )
            if oldest is not None:
                worst = max(worst, now - oldest)
    return worst


def _start_job(settings: Settings, run: str, pipelines: list[str], log: Path) -> subprocess.Popen:
    args = [arg for name in pipelines for arg in ("--pipeline", name)]
    with log.open("ab") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "speed_layer", "--instance", f"bench-{run}", *args],
            env=child_env(settings),
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=handle,
            start_new_session=True,
        )


def _wait_live(session, keyspace: str, jobs: list[subprocess.Popen], log: Path) -> None:
    """Until every view of both pipelines reported progress (the queries run)."""
    wanted = {"site_activity", "orders_by_currency"}
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if any(job.poll() is not None for job in jobs):
            raise RuntimeError(f"a speed job exited:\n{log.read_text()[-3000:]}")
        try:
            rows = session.execute(f"SELECT view_name, heartbeat_at FROM {keyspace}.speed_progress")
            if wanted <= {r.view_name for r in rows if r.heartbeat_at is not None}:
                return
        except Exception:  # the table appears when a job starts
            pass
        time.sleep(1)
    raise RuntimeError(f"no progress from both pipelines in 240 s:\n{log.read_text()[-3000:]}")


def measure(
    settings: Settings, layout: str, rate: float, seconds: float, root: Path, warmup: float = 15.0
) -> dict:
    """One layout at ``rate`` events/s per pipeline: freshness per pipeline (the first
    ``warmup`` seconds of traffic left out), CPU and memory per process."""
    from core.cassandra import connect

    run = uuid.uuid4().hex[:8]
    log = root / f"speed-{layout}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    shared = layout.startswith("shared")
    groups = [["web_events", "checkouts"]] if shared else [["web_events"], ["checkouts"]]
    scheduler = "FAIR" if layout == "shared-fair" else "FIFO"  # a FAIR pool per pipeline
    speed = settings.speed.model_copy(update={"scheduler": scheduler})
    settings = settings.model_copy(update={"speed": speed})
    jobs = [_start_job(settings, f"{run}-{i}", group, log) for i, group in enumerate(groups)]
    cluster, session = connect(settings.cassandra)
    keyspace = settings.cassandra.keyspace
    try:
        _wait_live(session, keyspace, jobs, log)
        lock = threading.Lock()
        produced = {"web_events": Produced(), "checkouts": Produced()}
        made, sequence = templates(), [0]
        producers = [
            threading.Thread(
                target=produce_at,
                args=(settings, made, rate, seconds, produced["web_events"], lock, run, sequence),
                daemon=True,
            ),
            threading.Thread(
                target=produce_orders,
                args=(settings, rate, seconds, produced["checkouts"], lock),
                daemon=True,
            ),
        ]
        cpu_before = [group_cpu_seconds(job.pid) for job in jobs]
        started = time.monotonic()
        for thread in producers:
            thread.start()
        lags: dict[str, list[float]] = {name: [] for name in produced}
        rss: list[list[float]] = [[] for _ in jobs]
        warmup = min(warmup, seconds / 2)
        while any(thread.is_alive() for thread in producers):
            time.sleep(0.5)
            for name in produced:
                lag = lag_of(session, keyspace, name, produced[name], lock)
                if time.monotonic() - started > warmup:
                    lags[name].append(lag)
            for i, job in enumerate(jobs):
                rss[i].append(group_rss_mb(job.pid))
                if job.poll() is not None:
                    raise RuntimeError(f"a speed job exited:\n{log.read_text()[-3000:]}")
        wall = time.monotonic() - started
        processes = [
            {
                "pipelines": group,
                "cpu_cores": round((group_cpu_seconds(job.pid) - before) / wall, 2),
                "rss_mb_max": max(samples, default=0.0),
            }
            for group, job, before, samples in zip(groups, jobs, cpu_before, rss, strict=True)
        ]
        return {
            "layout": layout,
            "rate_per_pipeline": rate,
            "events": {name: p.events for name, p in produced.items()},
            "freshness": {
                name: {
                    "p50_s": round(percentile(values, 0.5), 2),
                    "p99_s": round(percentile(values, 0.99), 2),
                    "max_s": round(max(values, default=float("nan")), 2),
                }
                for name, values in lags.items()
            },
            "processes": processes,
        }
    finally:
        for job in jobs:
            os.killpg(job.pid, signal.SIGTERM)
        for job in jobs:
            try:
                job.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
        session.execute(f"TRUNCATE {keyspace}.speed_progress")
        cluster.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=2000, help="events/s per pipeline")
    parser.add_argument("--seconds", type=float, default=90)
    parser.add_argument("--layouts", default="shared,separate", help="shared,shared-fair,separate")
    parser.add_argument(
        "--warmup",
        type=float,
        default=15.0,
        help="seconds of traffic left out of freshness (a fresh job's first micro-batches)",
    )
    args = parser.parse_args(argv)

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"pipelines-{run}"
    kafka = base.kafka.model_dump() | {
        "events_topic": f"bench.web.{run}",
        "dlq_topic": f"bench.web.dlq.{run}",
        "topics": {CHECKOUTS.name: f"bench.checkouts.{run}"},
    }
    settings = base.model_copy(
        update={
            "kafka": KafkaSettings(**kafka),
            "cassandra": base.cassandra.model_copy(update={"keyspace": f"bench_pipes_{run}"}),
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "cp")),
            "speed": base.speed.model_copy(update={"pipelines": ["web_events", "checkouts"]}),
        }
    )
    from confluent_kafka.admin import AdminClient

    from core.cassandra import connect, ensure_keyspace
    from ingest.topics import ensure_topics, pipeline_topics, platform_topics
    from layout import create_tables

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(
        admin, [*platform_topics(settings.kafka), *pipeline_topics(settings.kafka, [CHECKOUTS])]
    )
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(session, settings.cassandra.keyspace, settings.cassandra.replication)
    create_tables(settings)
    results = []
    try:
        for layout in args.layouts.split(","):
            print(f"[bench] {layout}: {args.rate:.0f} events/s per pipeline", file=sys.stderr)
            results.append(
                measure(settings, layout, args.rate, args.seconds, root / layout, args.warmup)
            )
            print(f"[bench] {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    finally:
        admin.delete_topics(
            [settings.kafka.events_topic, settings.kafka.dlq_topic, CHECKOUTS.topic_of(settings)]
        )
        session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}")
        cluster.shutdown()
        shutil.rmtree(root, ignore_errors=True)

    print(f"{'layout':>9} {'pipeline':>11} {'p50 s':>6} {'p99 s':>6} {'cores':>6} {'RSS MB':>7}")
    for result in results:
        for name, fresh in result["freshness"].items():
            own = next(p for p in result["processes"] if name in p["pipelines"])
            print(
                f"{result['layout']:>9} {name:>11} {fresh['p50_s']:>6.2f} {fresh['p99_s']:>6.2f} "
                f"{own['cpu_cores']:>6.2f} {own['rss_mb_max']:>7.0f}"
            )
    summary = {"results": results, "cores": os.cpu_count(), "seconds": args.seconds}
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
