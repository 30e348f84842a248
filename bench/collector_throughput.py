"""Collector throughput: HTTP -> validated -> acknowledged by Kafka, vs a raw produce loop.

Runs on the local platform (``make up`` first, or it brings Kafka up). In one
run it measures:

1. **collector, 1 worker**: a real collector process (``python -m ingest``,
   ``collector.workers=1``) on a bench-only topic, driven by concurrent HTTP
   clients posting Segment ``/v1/batch`` requests; events/s acknowledged and
   request latency p50/p99;
2. **collector, N workers** (``--workers``): the same with N worker processes
   on the port (``SO_REUSEPORT``, one producer each), the same clients;
3. **raw**: a confluent-kafka produce loop of the same enriched records with
   the same producer settings (idempotent, acks=all, lz4, linger), waiting for
   every acknowledgement; events/s.

Each collector runs once per body encoding (``--encodings plain,gzip``: the
same batches as JSON and gzip-compressed, as RudderStack's libraries send
them) and per load generator (``--generators go,python``): the Go program of
:mod:`bench.loadgen` (built here with the Go toolchain), which leaves the
cores to the collector, and Python's httpx, which takes about as much CPU per
request as the collector does. The collector's CPU is that of all its
processes; how its requests spread over the workers is read from its
``collector_worker_requests{pid}``.
With ``--baseline REV`` it first drives the collector of an earlier commit
(its files taken with ``git archive`` into the bench's state folder, run by
this virtualenv's Python, one process) with the same clients, bodies and
topic, so "N workers against the code before" is read within one run.
Timings are printed, never asserted.

    .venv/bin/python -m bench.collector_throughput --seconds 20 --concurrency 8 --workers 2
    .venv/bin/python -m bench.collector_throughput --baseline 2ba89a8  # the collector of 11-27
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import httpx

from bench import loadgen
from bench.procs import group_cpu_seconds
from core.settings import CollectorSettings, KafkaSettings, child_env, load_settings
from ingest.producer import producer_config
from platformctl import platform

WRITE_KEY = "bench-write-key-0001"


def request_bodies(run: str, batch: int, count: int = 50_000) -> tuple[list[dict], list[bytes]]:
    """``count`` distinct events of run ``run`` (no null fields, as SDKs send them) and the
    batch requests' bodies that carry them, ``batch`` events each."""
    events = [{k: v for k, v in e.items() if v is not None} for e in _events(count, run)]
    bodies = [
        json.dumps(
            {"batch": events[i : i + batch], "sentAt": events[i]["originalTimestamp"]}
        ).encode()
        for i in range(0, len(events), batch)
    ]
    return events, bodies


def _events(count: int, run: str) -> list[dict]:
    now = datetime.now(UTC).isoformat()
    return [
        {
            "type": "page" if i % 5 else "track",
            "event": "Element Clicked" if i % 5 == 0 else None,
            "messageId": f"{run}-{i}",
            "anonymousId": f"user-{i % 5000}",
            "properties": {
                "path": f"/page/{i % 200}",
                "title": "Bench page",
                "load_time_ms": 120 + i % 900,
            },
            "context": {
                "page": {"url": f"https://shop.example/page/{i % 200}", "path": f"/page/{i % 200}"},
                "userAgent": "Mozilla/5.0 (X11; Linux x86_64) bench",
                "library": {"name": "bench", "version": "1"},
            },
            "originalTimestamp": now,
        }
        for i in range(count)
    ]


REPO = Path(__file__).resolve().parents[1]


def baseline_tree(state_dir: Path, rev: str) -> tuple[Path, str]:
    """(a folder holding the files of commit ``rev``, its full id): ``git archive`` of it
    under the bench's state folder, made once per commit."""
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{rev}^{{commit}}"], cwd=REPO,
                         check=True, capture_output=True, text=True).stdout.strip()  # fmt: skip
    tree = state_dir / "bench" / f"baseline-{sha[:12]}"
    if not tree.is_dir():  # extracted beside it, then renamed: never half a tree
        partial = tree.with_name(f"{tree.name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", sha], cwd=REPO, check=True,
                                 capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(partial)], input=archive, check=True)
        partial.rename(tree)
    return tree, sha


def baseline_env(settings) -> dict[str, str]:
    """The settings an earlier collector needs, one field each (its sections may lack the
    fields this one has, and refuse what they do not know)."""
    kafka, collector = settings.kafka, settings.collector
    keys = {source: key.get_secret_value() for source, key in collector.write_keys.items()}
    fields = {
        "WAP_KAFKA__BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "WAP_KAFKA__EVENTS_TOPIC": kafka.events_topic,
        "WAP_KAFKA__DLQ_TOPIC": kafka.dlq_topic,
        "WAP_COLLECTOR__PORT": str(collector.port),
        "WAP_COLLECTOR__WRITE_KEYS": json.dumps(keys),
        "WAP_COLLECTOR__IP_ANONYMISATION": collector.ip_anonymisation,
        "WAP_LOCAL__STATE_DIR": str(settings.local.state_dir),
    }
    if collector.hash_key is not None:
        fields["WAP_COLLECTOR__HASH_KEY"] = collector.hash_key.get_secret_value()
    return {k: v for k, v in os.environ.items() if not k.startswith("WAP_")} | fields


def _start_collector(settings, port: int, tree: Path | None = None) -> subprocess.Popen:
    """``python -m ingest`` in a process group of its own (its workers join it); from the
    files in ``tree`` (an earlier commit's) when given."""
    if tree is None:
        env, cwd = child_env(settings), None
    else:
        env, cwd = baseline_env(settings) | {"PYTHONPATH": str(tree)}, tree
    proc = subprocess.Popen(
        [sys.executable, "-m", "ingest", "--instance", f"bench-{port}"],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"bench collector did not start: {proc.stderr.read().decode()}")
        time.sleep(0.2)


def _requests_per_worker(port: int, settings) -> list[int]:
    """The requests each worker answered, most first (``collector_worker_requests``)."""
    token = settings.monitoring.metrics_token.get_secret_value()
    bearer = {"Authorization": f"Bearer {token}"}  # /metrics takes the metrics token
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=bearer, timeout=10).text
    return sorted(
        (
            int(float(line.rsplit(" ", 1)[1]))
            for line in text.splitlines()
            if line.startswith("collector_worker_requests")
        ),
        reverse=True,
    )


async def _drive(
    url: str,
    bodies: list[bytes],
    per_body: int,
    seconds: float,
    concurrency: int,
    headers: dict[str, str] | None = None,
) -> dict:
    latencies: list[float] = []
    accepted = 0
    errors = 0
    stop_at = time.perf_counter() + seconds
    auth = httpx.BasicAuth(WRITE_KEY, "")

    async def worker(offset: int) -> None:
        nonlocal accepted, errors
        async with httpx.AsyncClient(base_url=url, auth=auth, timeout=30) as client:
            i = offset
            while time.perf_counter() < stop_at:
                body = bodies[i % len(bodies)]
                i += concurrency
                started = time.perf_counter()
                answer = await client.post(
                    "/v1/batch",
                    content=body,
                    headers={"content-type": "application/json", **(headers or {})},
                )
                latencies.append(time.perf_counter() - started)
                if answer.status_code == 200:
                    accepted += answer.json()["accepted"]
                else:
                    errors += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "events_per_s": accepted / elapsed,
        "requests": len(latencies),
        "errors": errors,
        "p50_ms": 1000 * statistics.median(latencies),
        "p99_ms": 1000 * latencies[int(0.99 * (len(latencies) - 1))],
        "events_per_request": per_body,
    }


def _raw_loop(settings, values: list[tuple[bytes, bytes]], seconds: float) -> dict:
    from confluent_kafka import Producer

    producer = Producer(producer_config(settings.kafka, settings.collector))
    topic = settings.kafka.events_topic
    acked = 0

    def on_delivery(error, _message) -> None:
        nonlocal acked
        if error is None:
            acked += 1

    started = time.perf_counter()
    i = 0
    while time.perf_counter() - started < seconds:
        key, value = values[i % len(values)]
        try:
            producer.produce(topic, value=value, key=key, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
            continue
        i += 1
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    return {"events_per_s": acked / elapsed, "events": acked}


def _go_drive(program, port: int, bodies: list[bytes], per_body: int, seconds: float,
              concurrency: int, headers: dict[str, str]) -> dict:  # fmt: skip
    """:func:`_drive`'s figures, the requests sent by the Go generator (closed loop)."""
    auth = "Basic " + base64.b64encode(f"{WRITE_KEY}:".encode()).decode()
    got = loadgen.drive(program, "127.0.0.1", port, "", ["/v1/batch"], connections=concurrency,
                        rate=None, seconds=seconds, warmup=0, bodies=bodies, sum_field="accepted",
                        headers={"Authorization": auth, "Content-Type": "application/json",
                                 **headers})  # fmt: skip
    figures = loadgen.summary("collector", got)
    return {
        "events_per_s": got["summed"] / got["elapsed_s"],
        **{name: figures[name] for name in ("requests", "errors", "p50_ms", "p99_ms")},
        "events_per_request": per_body,
    }


def _measure_collector(settings, args, encoded: dict, tree: Path | None = None) -> dict[str, dict]:
    """Drive one collector process (from ``tree`` when given) with each encoding and
    generator; figures per ``"<encoding> <generator>"``."""
    sides: dict[str, dict] = {}
    proc = _start_collector(settings, args.port, tree)
    try:
        for encoding in args.encodings.split(","):
            payloads, headers = encoded[encoding]
            for generator in args.generators:
                cpu_before = group_cpu_seconds(proc.pid)
                if generator == "go":
                    side = _go_drive(args.loadgen, args.port, payloads, args.batch,
                                     args.seconds, args.concurrency, headers)  # fmt: skip
                else:
                    side = asyncio.run(
                        _drive(
                            f"http://127.0.0.1:{args.port}",
                            payloads,
                            args.batch,
                            args.seconds,
                            args.concurrency,
                            headers,
                        )
                    )
                cpu = group_cpu_seconds(proc.pid) - cpu_before
                acknowledged = side["events_per_s"] * args.seconds
                side["cpu_us_per_event"] = 1e6 * cpu / max(1.0, acknowledged)
                side["cpu_cores_used"] = cpu / args.seconds
                side["body_kb"] = len(payloads[0]) / 1024
                sides[f"{encoding} {generator}"] = side
        for side in sides.values():
            side["requests_per_worker"] = _requests_per_worker(args.port, settings)
    finally:
        proc.terminate()
        proc.wait(90)
    return sides


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--batch", type=int, default=100, help="events per HTTP request")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument("--port", type=int, default=18188)
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="the collector's workers on the second side (the first runs one)",
    )
    parser.add_argument(
        "--encodings", default="plain,gzip", help="body encodings to drive: plain, gzip"
    )
    parser.add_argument(
        "--ip-anonymisation",
        choices=("truncate", "hash", "keep"),
        default="truncate",
        help="the collector's IP setting (hash with a bench-only key)",
    )
    parser.add_argument(
        "--generators",
        default="go,python" if loadgen.available() else "python",
        help="each drives every side: go (bench/loadgen, built here) and python (httpx)",
    )
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also drive the collector of this commit first (one process), e.g. 2ba89a8",
    )
    args = parser.parse_args(argv)
    args.generators = [g for g in args.generators.split(",") if g]

    base = load_settings()
    baseline = baseline_tree(base.local.state_dir, args.baseline) if args.baseline else None
    platform.up(base, ("kafka",))
    args.loadgen = loadgen.binary(base.local.state_dir) if "go" in args.generators else None
    run = uuid.uuid4().hex[:8]
    kafka = KafkaSettings(
        **(
            base.kafka.model_dump()
            | {"events_topic": f"bench.events.{run}", "dlq_topic": f"bench.dlq.{run}"}
        )
    )

    def with_workers(workers: int):
        collector = CollectorSettings(
            port=args.port,
            workers=workers,
            write_keys={"bench": WRITE_KEY},
            ip_anonymisation=args.ip_anonymisation,
            hash_key="bench-only-hash-key-" + "0" * 32,
        )
        return base.model_copy(update={"kafka": kafka, "collector": collector})

    settings = with_workers(1)
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))

    events, bodies = request_bodies(run, args.batch)
    print(
        f"[bench] {len(events)} distinct events, {len(bodies)} request bodies of "
        f"{args.batch} events (~{len(bodies[0]) // 1024} KB), {args.concurrency} clients, "
        f"{args.seconds:.0f}s per side, IP addresses: {args.ip_anonymisation}; "
        f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        flush=True,
    )

    encoded = {
        "plain": (bodies, {}),
        "gzip": ([gzip.compress(b, 6) for b in bodies], {"content-encoding": "gzip"}),
    }
    before = None
    if baseline is not None:
        before = _measure_collector(settings, args, encoded, tree=baseline[0])
    collectors = {
        workers: _measure_collector(with_workers(workers), args, encoded)
        for workers in sorted({1, args.workers})
    }

    # The raw loop produces the same enriched records the collector writes.
    from data_contracts import load_contract
    from data_contracts.derive import compile_fast_validator
    from ingest.enrich import RequestFacts
    from ingest.intake import Intake

    contract = load_contract("web_events", 1)
    intake = Intake(contract, compile_fast_validator(contract), settings.collector.max_event_bytes)
    facts = RequestFacts(datetime.now(UTC), "bench", contract.version)
    records = intake.route(events, facts).accepted
    raw = _raw_loop(settings, [(r.key, r.value) for r in records], args.seconds)
    admin.delete_topics([settings.kafka.events_topic, settings.kafka.dlq_topic])

    for workers, sides in collectors.items():
        for label, side in sides.items():
            encoding, generator = label.split()
            print(
                f"[bench] collector, {workers} worker(s), {encoding} bodies, {generator} clients "
                f"({side['body_kb']:.0f} KB): {side['events_per_s']:,.0f} events/s acknowledged "
                f"({side['requests']} requests, {side['errors']} errors), "
                f"request p50 {side['p50_ms']:.1f} ms, p99 {side['p99_ms']:.1f} ms; "
                f"collector CPU {side['cpu_us_per_event']:.0f} us/event "
                f"({side['cpu_cores_used']:.2f} cores); ratio to raw "
                f"{side['events_per_s'] / raw['events_per_s']:.0%}"
            )
        print(f"[bench] requests per worker ({workers}): {side['requests_per_worker']}")
    print(f"[bench] raw confluent-kafka loop: {raw['events_per_s']:,.0f} events/s acknowledged")
    speedup, over_baseline = {}, {}
    for label in collectors[1]:
        one, many = collectors[1][label], collectors[max(collectors)][label]
        speedup[label] = many["events_per_s"] / one["events_per_s"]
        print(f"[bench] {max(collectors)} workers / 1 worker ({label}): {speedup[label]:.2f}x")
    for label, side in (before or {}).items():
        print(
            f"[bench] baseline {baseline[1][:7]} ({label}): {side['events_per_s']:,.0f} events/s, "
            f"p50 {side['p50_ms']:.1f} ms, p99 {side['p99_ms']:.1f} ms, "
            f"{side['cpu_us_per_event']:.0f} us/event ({side['cpu_cores_used']:.2f} cores)"
        )
        for workers, sides in collectors.items():
            ratio = sides[label]["events_per_s"] / side["events_per_s"]
            over_baseline[f"{workers} {label}"] = ratio
            print(f"[bench] {workers} worker(s) now / baseline ({label}): {ratio:.2f}x")
    print(
        json.dumps(
            {
                "collector": {str(w): sides for w, sides in collectors.items()},
                "baseline": {"commit": baseline[1], "sides": before} if baseline else None,
                "raw": raw,
                "speedup": speedup,
                "over_baseline": over_baseline,
                "cores": os.cpu_count(),
            }
        )
    )


if __name__ == "__main__":
    main()
