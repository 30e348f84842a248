"""Collector throughput on three Kafka brokers (acks=all, three replicas, two in sync) next
to one broker, in one run on the same machine.

Both Kafkas are started by ``platformctl``, each in a temporary state directory of its
own (the installed jars linked, nothing downloaded): a single broker
(``local.kafka_nodes=1``) and a three-node cluster (``local.kafka_nodes=3``: a record is
acknowledged only once two of its three replicas have it), each with a real collector
process (``python -m ingest``) on it. The collector benchmark's clients
(:mod:`bench.collector_throughput`: Segment ``/v1/batch`` requests of 100 events) then
drive one side, then the other, in alternating windows of the same length, so both see
the same machine (on a shared one, its load changes from minute to minute). Prints each
window, each side's mean events/s and the ratio (JSON last); nothing is asserted.

    .venv/bin/python -m bench.kafka_cluster --seconds 20 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

from bench.collector_throughput import WRITE_KEY, _drive, _start_collector, request_bodies
from bench.procs import group_cpu_seconds
from core.settings import CollectorSettings, KafkaSettings, LocalSettings, Settings, load_settings
from platformctl import platform
from platformctl.install import install_jars, jars_dir
from platformctl.process import port_open

SIDES = {1: 0, 3: 10}
"""Kafka nodes -> offset of the side's ports from ``--port``: the single broker takes 2
ports, the cluster 6, each collector one (offset + 20)."""


def _side_settings(base: Settings, root: Path, nodes: int, port: int) -> Settings:
    """``base`` against a Kafka of ``nodes`` nodes in ``root``, on bench-only topics."""
    state = root / f"kafka-{nodes}"
    (state / "jars").mkdir(parents=True)
    os.symlink(jars_dir(base, "kafka"), state / "jars" / "kafka")
    run = uuid.uuid4().hex[:8]
    sections = {name: getattr(base, name) for name in Settings.model_fields}
    return Settings(
        **sections
        | {
            "kafka": KafkaSettings(
                bootstrap_servers=f"127.0.0.1:{port}",
                events_topic=f"bench.events.{run}",
                dlq_topic=f"bench.dlq.{run}",
                suppressions_topic=f"bench.suppressions.{run}",
            ),
            "collector": CollectorSettings(
                port=port + 20,
                workers=1,  # one process, as when the figures in docs/benchmarks.md were taken
                write_keys={"bench": WRITE_KEY},
                delivery_timeout_s=30,
            ),
            "local": LocalSettings(
                state_dir=state, kafka_nodes=nodes, kafka_controller_port=port + 1
            ),
        }
    )


def _start(stack: ExitStack, settings: Settings) -> int:
    """Kafka up, the bench topics, a collector on them; all stopped when ``stack`` closes.
    Returns the collector's pid."""
    services = platform.KAFKA_CLUSTER_SERVICES[: settings.local.kafka_nodes]
    stack.callback(platform.down, settings, services)
    started = time.monotonic()
    platform.up(settings, services, install_missing=False)
    print(
        f"[bench] {settings.local.kafka_nodes} Kafka node(s) up in "
        f"{time.monotonic() - started:.0f}s",
        flush=True,
    )
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    ensure_topics(AdminClient(settings.kafka.client_config()), platform_topics(settings.kafka))
    collector = _start_collector(settings, settings.collector.port)
    stack.callback(collector.wait, 30)
    stack.callback(collector.terminate)
    return collector.pid


def _summary(windows: list[dict]) -> dict:
    return {
        "events_per_s": statistics.mean(w["events_per_s"] for w in windows),
        "p50_ms": statistics.median(w["p50_ms"] for w in windows),
        "p99_ms": max(w["p99_ms"] for w in windows),
        "errors": sum(w["errors"] for w in windows),
        "cpu_us_per_event": statistics.mean(w["cpu_us_per_event"] for w in windows),
        "windows": windows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=20, help="length of one window")
    parser.add_argument("--rounds", type=int, default=2, help="windows per side, alternating")
    parser.add_argument("--batch", type=int, default=100, help="events per HTTP request")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent HTTP clients")
    parser.add_argument(
        "--port", type=int, default=29092, help="first of the ports the bench takes (to +21)"
    )
    args = parser.parse_args(argv)

    wanted = [args.port + o + i for o in SIDES.values() for i in range(6)]
    busy = [p for p in [*wanted, *(args.port + o + 20 for o in SIDES.values())] if port_open(p)]
    if busy:
        raise SystemExit(f"ports {busy} are in use: pick another --port")
    base = load_settings()
    install_jars(base, "kafka")  # nothing to do when installed
    _, bodies = request_bodies("bench", args.batch)
    print(
        f"[bench] {len(bodies)} request bodies of {args.batch} events, {args.concurrency} "
        f"clients; {args.rounds} windows of {args.seconds:.0f}s per side, alternating",
        flush=True,
    )
    windows: dict[int, list[dict]] = {nodes: [] for nodes in SIDES}
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as root, ExitStack() as stack:
        sides = {
            nodes: _side_settings(base, Path(root), nodes, args.port + offset)
            for nodes, offset in SIDES.items()
        }
        pids = {nodes: _start(stack, settings) for nodes, settings in sides.items()}
        for settings in sides.values():  # warm-up: each collector's first requests
            url = f"http://127.0.0.1:{settings.collector.port}"
            asyncio.run(_drive(url, bodies, args.batch, 3, args.concurrency))
        for round_ in range(args.rounds):
            for nodes, settings in sides.items():
                cpu = group_cpu_seconds(pids[nodes])
                url = f"http://127.0.0.1:{settings.collector.port}"
                window = asyncio.run(
                    _drive(url, bodies, args.batch, args.seconds, args.concurrency)
                )
                cpu = group_cpu_seconds(pids[nodes]) - cpu
                window["cpu_us_per_event"] = (
                    1e6 * cpu / max(1.0, window["events_per_s"] * args.seconds)
                )
                windows[nodes].append(window)
                print(
                    f"[bench] round {round_ + 1}, {nodes} broker(s): "
                    f"{window['events_per_s']:,.0f} events/s, p50 {window['p50_ms']:.1f} ms, "
                    f"p99 {window['p99_ms']:.1f} ms, {window['errors']} errors",
                    flush=True,
                )
    results = {nodes: _summary(w) for nodes, w in windows.items()}
    for nodes, side in results.items():
        kafka = sides[nodes].kafka
        print(
            f"[bench] {nodes} broker(s), replication {kafka.replication_factor}, min ISR "
            f"{kafka.min_insync_replicas}: {side['events_per_s']:,.0f} events/s acknowledged "
            f"(mean of {len(side['windows'])} windows, {side['errors']} errors), request p50 "
            f"{side['p50_ms']:.1f} ms, p99 {side['p99_ms']:.1f} ms; collector CPU "
            f"{side['cpu_us_per_event']:.0f} us/event"
        )
    ratio = results[3]["events_per_s"] / results[1]["events_per_s"]
    print(f"[bench] ratio three brokers / one broker: {ratio:.0%}")
    print(json.dumps({"sides": results, "ratio": ratio, "cores": os.cpu_count()}))


if __name__ == "__main__":
    main()
