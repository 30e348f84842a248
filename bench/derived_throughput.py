"""Derived pipelines: a day of ``web_sessions`` and ``order_attribution`` against a plain Spark
job doing the same transformation over the same inputs.

Runs on the local platform (it brings Kafka and Cassandra up if needed). Each run gets
topics of its own and a lake under ``.platform/bench/``, both removed at the end.

**The inputs** (timed and printed, not compared): one simulated day of ``--web-events``
web events whose logged-in users check out (``checkout_rate``), produced through the
collector's intake; the checkout service's records of those orders and orders of its own
buyers, ``--orders`` in all, on a topic of their own; both pipelines' ingest steps
(``bronze``, ``silver``, ``check_silver``) fill the lake, as the hourly DAGs leave it.

**Measured**, in one SparkSession, after a warm-up of both sides on a small day:

- *plain*: the transformation's module called directly on the input tables, whole
  (``web_events``' silver; the checkouts' silver and the ``web_sessions`` table: the day,
  and the few events silver placed on the next day), narrowed to the columns it reads,
  written to Parquet: no ledger, no gate, no Delta commit;
- *derive*: the ``derive`` step as the ``<name>_build`` DAG runs it: the days found in
  the inputs' ledgers, the inputs read and narrowed, the rows built, the contract's
  columns and suite checked before the write, the day's partition replaced in a Delta
  commit, the ledger entry.

The ratio is plain seconds / derive seconds (the target: at least 50%). Rows are checked
equal on both sides after the clock. Figures are printed (a table and one JSON line) and
written to ``.platform/artifacts/bench_derived.json``.

    .venv/bin/python -m bench.derived_throughput --web-events 1000000 --orders 100000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.meter import Meter
from core.settings import KafkaSettings, LakeSettings, Settings, load_settings
from platformctl import platform

DAY = datetime(2024, 3, 1, tzinfo=UTC)
INGEST = ("bronze", "silver", "check_silver")


def _traffic(web_events: int, orders: int, seed: int) -> tuple[list, list]:
    """A day of web events with checkouts, and the checkout service's records (those
    orders, then orders of its own buyers up to ``orders``)."""
    from ingest.simulator import SimulatorConfig, generate
    from pipelines.simulators.checkouts import CheckoutConfig, orders_of_visits
    from pipelines.simulators.checkouts import generate as generate_orders

    config = SimulatorConfig(
        seed=seed, events=web_events, rate=web_events / 86_400, start=DAY,
        users=max(1000, web_events // 20), checkout_rate=0.01, duplicate_rate=0.01,
        late_rate=0.005, out_of_order_rate=0.05, invalid_rate=0.002,
    )  # fmt: skip
    web = generate(config)
    visits = orders_of_visits(web)
    own = max(0, orders - len(visits))
    shop = generate_orders(
        CheckoutConfig(seed=seed, events=own, start=DAY, rate=max(own, 1) / 86_400, buyers=5000)
    )
    return web, visits + shop


def _lake(base: Settings, root: Path, name: str) -> Settings:
    """``base`` with topics and a lake of this run's ``name``."""
    topic = f"bench.derived.{name}"
    kafka = base.kafka.model_dump() | {
        "events_topic": f"{topic}.web",
        "dlq_topic": f"{topic}.web.dlq",
        "suppressions_topic": f"{topic}.suppressions",
        "topics": {"checkouts": f"{topic}.shop"},
    }
    return base.model_copy(
        update={
            "kafka": KafkaSettings(**kafka),
            "lake": LakeSettings(root=str(root / name / "lake"), checkpoint_root=str(root / name)),
            "batch": base.batch.model_copy(update={"reports_dir": root / name / "quality"}),
        }
    )


def _fill(spark: Any, settings: Settings, web: list, orders: list) -> dict[str, float]:
    """Both topics produced, both pipelines' ingest steps run; seconds of each part."""
    from confluent_kafka.admin import AdminClient

    from batch_layer.runner import run_steps
    from ingest.simulator.direct import produce_direct
    from ingest.topics import ensure_topics, pipeline_topics, platform_topics
    from pipelines import pipeline
    from pipelines.simulators.checkouts import produce

    admin = AdminClient(settings.kafka.client_config())
    shop = pipeline("checkouts")
    ensure_topics(
        admin, [*platform_topics(settings.kafka), *pipeline_topics(settings.kafka, [shop])]
    )
    took: dict[str, float] = {}
    started = time.perf_counter()
    for first in range(0, len(web), 50_000):
        produce_direct(web[first : first + 50_000], settings)
    produce(orders, settings.kafka.client_config(), shop.topic_of(settings))
    took["produce"] = time.perf_counter() - started
    for spec in (pipeline("web_events"), shop):
        started = time.perf_counter()
        summary, code = run_steps(spark, settings, INGEST, spec, f"bench-{spec.name}")
        if code:
            raise RuntimeError(f"{spec.name}'s ingest failed: {summary.get('failed')}")
        took[f"ingest {spec.name}"] = time.perf_counter() - started
        print(f"[bench]   {spec.name}: ingest {took[f'ingest {spec.name}']:.1f}s", flush=True)
    return took


def _plain(spark: Any, settings: Settings, name: str, out: Path, meter: Meter) -> dict:
    """The transformation alone over the day's inputs -> Parquet."""
    import importlib

    from batch_layer.silver import silver_path
    from derived.inputs import project
    from layout.lake import derived_path
    from pipelines import DERIVED, derived_pipeline, pipeline

    module = importlib.import_module(f"derived.{derived_pipeline(name).transform}")
    derived = {d.name: d for d in DERIVED}
    phase: dict[str, Any] = {}
    with meter.measure(phase):
        inputs = {}
        for source, columns in module.READS.items():
            if source in derived:
                path = derived_path(settings, source)
            else:
                path = silver_path(settings, pipeline(source))
            inputs[source] = project(spark.read.format("delta").load(path), columns)
        module.build(inputs).write.mode("overwrite").parquet(str(out))
    phase["rows"] = spark.read.parquet(str(out)).count()
    return phase


def _derive(spark: Any, settings: Settings, name: str, meter: Meter) -> dict:
    """The ``derive`` step as the build DAG runs it."""
    from batch_layer.runner import run_step
    from pipelines import derived_pipeline

    phase: dict[str, Any] = {}
    with meter.measure(phase):
        run = run_step(spark, settings, "derive", derived_pipeline(name), "bench-derive")
    phase["rows"] = run.rows
    return phase


def _compare(spark: Any, settings: Settings, root: Path, meter: Meter) -> dict:
    out = {}
    for name in ("web_sessions", "order_attribution"):
        plain = _plain(spark, settings, name, root / f"plain-{name}", meter)
        derive = _derive(spark, settings, name, meter)
        if plain["rows"] != derive["rows"]:
            raise RuntimeError(f"{name}: plain wrote {plain['rows']} rows, derive {derive['rows']}")
        ratio = plain["seconds"] / derive["seconds"]
        out[name] = {"plain": plain, "derive": derive, "ratio": ratio}
        print(
            f"[bench]   {name}: plain {plain['seconds']:.1f}s, derive {derive['seconds']:.1f}s "
            f"({plain['rows']:,} rows): {out[name]['ratio']:.0%}",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.derived_throughput", description=__doc__)
    parser.add_argument("--web-events", type=int, default=1_000_000)
    parser.add_argument("--orders", type=int, default=100_000)
    parser.add_argument("--warmup-events", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bench lake and topics")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient

    from core.spark import build_spark_session

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"derived-{run}"
    print(f"[bench] run {run}, load average {os.getloadavg()[0]:.2f}, lake {root}", flush=True)
    spark = build_spark_session(base, app_name="bench-derived")
    meter = Meter(spark)
    result: dict[str, Any] = {"run": run, "cores": os.cpu_count()}
    names = []
    try:
        warm = _lake(base, root, f"{run}-warmup")
        names.append(warm)
        _fill(spark, warm, *_traffic(args.warmup_events, args.warmup_events // 10, args.seed + 1))
        _compare(spark, warm, root / "warmup", meter)

        started = time.perf_counter()
        web, orders = _traffic(args.web_events, args.orders, args.seed)
        print(
            f"[bench] generated {len(web):,} web messages and {len(orders):,} checkout records "
            f"in {time.perf_counter() - started:.0f}s",
            flush=True,
        )
        day = _lake(base, root, f"{run}-day")
        names.append(day)
        result["inputs"] = {"web_messages": len(web), "checkout_records": len(orders)}
        took = _fill(spark, day, web, orders)
        result["setup_seconds"] = {k: round(v, 1) for k, v in took.items()}
        del web, orders
        result["day"] = _compare(spark, day, root / "day", meter)
    finally:
        meter.stop()
        spark.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
            admin = AdminClient(base.kafka.client_config())
            admin.delete_topics(
                [t for s in names for t in (s.kafka.events_topic, s.kafka.dlq_topic,
                                            s.kafka.suppressions_topic, *s.kafka.topics.values())]
            )  # fmt: skip
    _print(result)
    artifact = base.local.state_dir / "artifacts" / "bench_derived.json"
    artifact.parent.mkdir(parents=True, exist_ok=True)
    artifact.write_text(json.dumps(result, indent=2, default=str))
    return 0


def _print(result: dict) -> None:
    print("\n| derived pipeline, one day | rows | plain s | derive s | plain / derive | jobs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, r in result["day"].items():
        jobs = f"{r['plain']['jobs']} / {r['derive']['jobs']}"
        print(
            f"| {name} | {r['plain']['rows']:,} | {r['plain']['seconds']:.1f} | "
            f"{r['derive']['seconds']:.1f} | {r['ratio']:.0%} | {jobs} |"
        )
    print(json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
