"""Batch throughput: Kafka -> bronze -> silver -> gold, vs a plain Kafka -> Parquet Spark job.

Runs on the local platform (it brings Kafka and Cassandra up if needed: bronze
reads the speed layer's watermarks from Cassandra; nothing is published). Each
run gets topics of its own and a lake under ``.platform/bench/``, both removed
at the end. The events are
simulator traffic spread over one simulated day (a few duplicates, late,
skewed and invalid events), produced with the collector's own intake
(:func:`ingest.simulator.direct.produce_direct`).

In one SparkSession, after a warm-up of both sides on a small topic, it
measures:

1. **raw**: ``spark.read.format("kafka")`` over the topic's whole offset range
   -> Parquet; the plain job the batch layer is compared with;
2. **pipeline**: ``bronze``, ``silver``, ``check_silver``, ``gold``,
   ``check_gold`` as ``python -m batch_layer`` runs them (``run_step``), over
   the same offsets into a fresh lake; per step: seconds, JVM CPU and Spark
   jobs. "Without gates" is the sum of the bronze, silver and gold steps; the
   gates' seconds, jobs and share of the run are printed next to the raw job's,
   then both gates' suites over the lake the run left, by Great Expectations
   alone and in one pass (:mod:`bench.gate_suites`), in jobs and seconds;
3. **day**: one simulated day of ``--day-events`` events, Kafka -> gold (and
   the raw job over the same range), then the backfill of that day
   (``--dates DAY..DAY``: silver rebuilt from bronze, the gates, gold);
4. **backfill** (``--backfill-days``, :mod:`bench.batch_backfill`): the
   backfill of one day among 30 days of bronze against that day alone;
5. **DAG pair** (``--dag-pair-events``, :mod:`bench.batch_dags`): the hourly
   ingest and views DAGs through the real Airflow scheduler over new events,
   with the whole platform up (after the SparkSession above has stopped).

events/s counts the records of the Kafka range. Spark runs with the
project's settings (``WAP_SPARK__*`` changes them, e.g. ``WAP_SPARK__EXTRA_CONF``
for a Delta or Spark key; the JSON records it). The order is raw, then
pipeline; ``--rounds 2`` adds a round in the other order. Figures are printed
(a table and one JSON line) and written to ``.platform/artifacts/bench_batch.json``;
nothing is asserted beyond the row counts.

    .venv/bin/python -m bench.batch_throughput --events 200000 --day-events 1000000 \
        --backfill-days 30 --backfill-day-events 30000 --dag-pair-events 10000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gate_suites import gate_figures, print_gates, run_suites
from bench.meter import Meter
from core.settings import KafkaSettings, LakeSettings, Settings, load_settings
from platformctl import platform

DAY = datetime(2024, 3, 1, tzinfo=UTC)
PIPELINE = ("bronze", "silver", "check_silver", "gold", "check_gold")
BACKFILL = ("silver", "check_silver", "gold", "check_gold")
GATES = ("check_silver", "check_gold")
CHUNK = 50_000


# -- data -------------------------------------------------------------------------------------


def simulated_day(events: int, seed: int, days: int = 1) -> list:
    """``events`` distinct events from midnight over ~24 h (``days`` days), with a realistic
    share of faults."""
    from ingest.simulator import SimulatorConfig, generate

    return generate(
        SimulatorConfig(
            seed=seed,
            events=events,
            rate=events / (86_400 * days),
            start=DAY,
            users=max(1000, events // 20),
            duplicate_rate=0.01,
            late_rate=0.005,
            out_of_order_rate=0.05,
            skewed_client_rate=0.02,
            invalid_rate=0.002,
        )
    )


def produce_day(settings: Settings, events: int, seed: int) -> dict[int, int]:
    """Simulate a day of ``events`` (:func:`simulated_day`) and produce it to the settings'
    topic, with progress lines; return the topic's end offsets."""
    started = time.perf_counter()
    day = simulated_day(events, seed)
    print(f"[bench] generated {len(day):,} messages in {time.perf_counter() - started:.1f}s")
    return _produce(day, settings)


def _topic_settings(base: Settings, topic: str) -> Settings:
    """``base`` reading ``topic`` (dead letters to ``<topic>.dlq``)."""
    kafka = base.kafka.model_dump() | {"events_topic": topic, "dlq_topic": f"{topic}.dlq"}
    return base.model_copy(update={"kafka": KafkaSettings(**kafka)})


def _with_lake(settings: Settings, folder: Path) -> Settings:
    """``settings`` with the lake and the quality reports under ``folder``."""
    return settings.model_copy(
        update={
            "lake": LakeSettings(root=str(folder / "lake"), checkpoint_root=str(folder / "cp")),
            "batch": settings.batch.model_copy(update={"reports_dir": folder / "quality"}),
        }
    )


def _produce(events: list, settings: Settings) -> dict[int, int]:
    """Produce ``events`` in chunks (a progress line each); return the topic's end offsets."""
    from batch_layer.bronze import stable_end
    from ingest.simulator.direct import produce_direct

    started = time.perf_counter()
    counts = {"accepted": 0, "dead_lettered": 0}
    for first in range(0, len(events), CHUNK):
        for label, n in produce_direct(events[first : first + CHUNK], settings).items():
            counts[label] += n
        done = min(first + CHUNK, len(events))
        rate = done / (time.perf_counter() - started)
        if len(events) > CHUNK:
            print(f"[bench]   produced {done:,}/{len(events):,} ({rate:,.0f} msg/s)", flush=True)
    end = stable_end(settings, settings.kafka.events_topic)
    if sum(end.values()) != counts["accepted"]:
        raise RuntimeError(f"Topic holds {sum(end.values())} records, produced {counts}.")
    print(
        f"[bench] {settings.kafka.events_topic}: {counts['accepted']:,} records "
        f"({counts['dead_lettered']:,} dead-lettered) in {time.perf_counter() - started:.1f}s",
        flush=True,
    )
    return end


# -- measuring --------------------------------------------------------------------------------


def run_raw(spark: Any, settings: Settings, end: dict[int, int], out: Path, meter: Meter) -> dict:
    """Kafka offsets 0..end -> Parquet, the plain Spark way; rows checked after the clock."""
    topic = settings.kafka.events_topic
    phase = {"records": sum(end.values())}
    with meter.measure(phase):
        (
            spark.read.format("kafka")
            .options(**settings.kafka.spark_options())
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .option("startingOffsets", json.dumps({topic: {str(p): 0 for p in end}}))
            .option("endingOffsets", json.dumps({topic: {str(p): o for p, o in end.items()}}))
            .option("failOnDataLoss", "true")
            .load()
            .write.mode("overwrite")
            .parquet(str(out))
        )
    written = spark.read.parquet(str(out)).count()
    if written != phase["records"]:
        raise RuntimeError(f"Raw job wrote {written} rows of {phase['records']} records.")
    return phase


def run_pipeline(
    spark: Any,
    settings: Settings,
    steps: tuple[str, ...],
    run_id: str,
    meter: Meter,
    dates: list | None = None,
) -> tuple[dict, dict]:
    """The steps as ``python -m batch_layer`` runs them: (timings per step, results per step)."""
    from batch_layer.runner import run_step
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    timings: dict[str, dict] = {}
    results: dict[str, Any] = {}
    for step in steps:
        with meter.measure(timings.setdefault(step, {})):
            results[step] = run_step(spark, settings, step, WEB_EVENTS, run_id, dates)
        print(f"[bench]   {step}: {timings[step]['seconds']:.1f}s", flush=True)
    return timings, results


def _summary(records: int, steps: dict[str, dict]) -> dict:
    total = sum(s["seconds"] for s in steps.values())
    ungated = sum(s["seconds"] for name, s in steps.items() if name not in GATES)
    return {
        "records": records,
        "seconds": round(total, 2),
        "events_per_s": round(records / total),
        "seconds_without_gates": round(ungated, 2),
        "events_per_s_without_gates": round(records / ungated),
        "jobs": sum(s["jobs"] for s in steps.values()),
        "steps": steps,
    }


def _check(label: str, expected: int, actual: int) -> None:
    if expected != actual:
        raise RuntimeError(f"{label}: expected {expected}, got {actual}.")


def compare(
    spark: Any,
    settings: Settings,
    end: dict[int, int],
    lake: Path,
    meter: Meter,
    raw_first: bool,
    suites: bool = True,
) -> tuple[dict, dict, dict]:
    """The raw job and the pipeline over the same range: (raw, pipeline summary, results).
    The summary holds the gates' figures and, with ``suites``, their suites by GX alone
    and in one pass over the lake the run left (:mod:`bench.gate_suites`)."""
    records = sum(end.values())
    pipeline_settings = _with_lake(settings, lake)
    sides = ["raw", "pipeline"] if raw_first else ["pipeline", "raw"]
    out: dict[str, Any] = {}
    for side in sides:
        print(f"[bench] {side} over {records:,} records ...", flush=True)
        if side == "raw":
            out["raw"] = run_raw(spark, settings, end, lake / "raw.parquet", meter)
        else:
            steps, results = run_pipeline(spark, pipeline_settings, PIPELINE, "bench", meter)
            _check("bronze rows", records, results["bronze"].rows)
            out["pipeline"], out["results"] = _summary(records, steps), results
            out["pipeline"]["gates"] = gate_figures(out["pipeline"])
            if suites:
                days = list(results["silver"].dates)
                out["pipeline"]["suites"] = run_suites(spark, pipeline_settings, days, meter)
    out["raw"]["events_per_s"] = round(records / out["raw"]["seconds"])
    return out["raw"], out["pipeline"], out["results"]


# -- the run ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.batch_throughput", description=__doc__)
    parser.add_argument("--events", type=int, default=200_000, help="events of the comparison")
    parser.add_argument(
        "--day-events", type=int, default=1_000_000, help="events of the day (0: skip)"
    )
    parser.add_argument(
        "--backfill-days", type=int, default=30, help="days of bronze of the backfill (0: skip)"
    )
    parser.add_argument("--backfill-day-events", type=int, default=30_000)
    parser.add_argument(
        "--dag-pair-events",
        type=int,
        default=10_000,
        help="new events of the hourly DAG pair through Airflow (0: skip)",
    )
    parser.add_argument("--warmup-events", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=1, help="comparison rounds, order alternated")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", action="store_true", help="keep the bench lake and topics")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient

    from core.spark import build_spark_session
    from ingest.simulator import build_truth
    from ingest.topics import ensure_topics, platform_topics

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"batch-{run}"
    admin = AdminClient(base.kafka.client_config())
    topics: list[str] = []
    load_before = os.getloadavg()
    print(f"[bench] run {run}, load average {load_before[0]:.2f}, lake {root}", flush=True)

    def topic_with(name: str, events: list) -> tuple[Settings, dict[int, int]]:
        settings = _topic_settings(base, f"bench.batch.{run}.{name}")
        ensure_topics(admin, platform_topics(settings.kafka))
        topics.extend([settings.kafka.events_topic, settings.kafka.dlq_topic])
        return settings, _produce(events, settings)

    spark = build_spark_session(base, app_name="bench-batch-throughput")
    meter = Meter(spark)
    result: dict[str, Any] = {
        "run": run,
        "cores": os.cpu_count(),
        "order": "raw, pipeline",
        "spark": {"master": base.spark.master, **base.spark.extra_conf},
    }
    try:
        print(f"[bench] warm-up: {args.warmup_events:,} events, both sides", flush=True)
        warm, warm_end = topic_with("warmup", simulated_day(args.warmup_events, args.seed + 1))
        compare(spark, warm, warm_end, root / "warmup", meter, raw_first=True)

        started = time.perf_counter()
        events = simulated_day(args.events, args.seed)
        truth = build_truth(events)
        print(
            f"[bench] generated {len(events):,} messages in {time.perf_counter() - started:.1f}s",
            flush=True,
        )
        settings, end = topic_with("throughput", events)
        del events
        rounds = []
        for n in range(args.rounds):
            raw, pipe, results = compare(
                spark, settings, end, root / f"throughput-{n}", meter, raw_first=n % 2 == 0
            )
            _check("silver rows (all days)", truth.valid_events, results["silver"].events)
            rounds.append({"raw": raw, "pipeline": pipe, "raw_first": n % 2 == 0})
        result["throughput"] = {
            "rounds": rounds,
            "ratio": statistics.median(
                r["pipeline"]["events_per_s"] / r["raw"]["events_per_s"] for r in rounds
            ),
            "ratio_without_gates": statistics.median(
                r["pipeline"]["events_per_s_without_gates"] / r["raw"]["events_per_s"]
                for r in rounds
            ),
        }

        if args.day_events:
            started = time.perf_counter()
            print(f"[bench] generating {args.day_events:,} events of {DAY:%F} ...", flush=True)
            events = simulated_day(args.day_events, args.seed + 2)
            truth = build_truth(events)
            print(
                f"[bench] generated {len(events):,} messages in "
                f"{time.perf_counter() - started:.1f}s",
                flush=True,
            )
            produce_started = time.perf_counter()
            day_settings, day_end = topic_with("day", events)
            produce_s = time.perf_counter() - produce_started
            del events
            raw, pipe, results = compare(
                spark, day_settings, day_end, root / "day", meter, raw_first=True
            )
            print(f"[bench] backfill of {DAY:%F} from bronze ...", flush=True)
            steps, backfill = run_pipeline(
                spark,
                _with_lake(day_settings, root / "day"),
                BACKFILL,
                "bench-backfill",
                meter,
                dates=[DAY.date()],
            )
            in_day = sum(
                n for minute, n in truth.events_per_minute.items() if minute.startswith(f"{DAY:%F}")
            )
            _check("silver rows of the day", in_day, backfill["silver"].events)
            result["day"] = {
                "produce_s": round(produce_s, 1),
                "raw": raw,
                "pipeline": pipe,
                "ratio": pipe["events_per_s"] / raw["events_per_s"],
                "backfill": _summary(in_day, steps) | {"events_of_day": in_day},
            }
        if args.backfill_days:
            from bench.batch_backfill import run_backfill_phase

            result["backfill"] = run_backfill_phase(
                spark,
                topic_with,
                _with_lake,
                run_pipeline,
                root,
                meter,
                args.backfill_days,
                args.backfill_day_events,
                args.seed + 3,
            )
    finally:
        meter.stop()
        spark.stop()
        if not args.keep:
            admin.delete_topics(topics)
            shutil.rmtree(root, ignore_errors=True)
    if args.dag_pair_events:
        from bench.batch_dags import run_dag_pair

        print(f"[bench] hourly DAG pair over {args.dag_pair_events:,} events ...", flush=True)
        result["dag_pair"] = run_dag_pair(base, events=args.dag_pair_events)
    result["load_average"] = {
        "before": round(load_before[0], 2),
        "during_mean": round(statistics.fmean(meter.load), 2) if meter.load else None,
        "during_max": round(max(meter.load), 2) if meter.load else None,
    }
    _print(result)
    out = base.local.state_dir / "artifacts" / "bench_batch.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


def _print(result: dict) -> None:
    rows: list[tuple[str, dict]] = []
    for n, r in enumerate(result["throughput"]["rounds"]):
        label = f"round {n + 1}" if len(result["throughput"]["rounds"]) > 1 else "comparison"
        rows.append((f"{label}: raw Kafka -> Parquet", r["raw"]))
        rows.append((f"{label}: pipeline Kafka -> gold", r["pipeline"]))
        rows += [(f"  {step}", s) for step, s in r["pipeline"]["steps"].items()]
    if "day" in result:
        day = result["day"]
        rows.append(("day: raw Kafka -> Parquet", day["raw"]))
        rows.append(("day: pipeline Kafka -> gold", day["pipeline"]))
        rows += [(f"  {step}", s) for step, s in day["pipeline"]["steps"].items()]
        rows.append(("day: backfill silver + gold", day["backfill"]))
        rows += [(f"  {step}", s) for step, s in day["backfill"]["steps"].items()]
    print(
        f"\n{'phase':<34} {'records':>9} {'seconds':>8} {'events/s':>9} "
        f"{'JVM cores':>9} {'other':>6} {'jobs':>5}"
    )
    for name, r in rows:
        records = f"{r['records']:,}" if "records" in r else ""
        rate = f"{r['events_per_s']:,}" if "events_per_s" in r else ""
        print(
            f"{name:<34} {records:>9} {r['seconds']:>8.1f} {rate:>9} "
            f"{r.get('jvm_cores', ''):>9} {r.get('other_cores', ''):>6} {r['jobs']:>5}"
        )
    t = result["throughput"]
    print(
        f"\nratio pipeline/raw: {t['ratio']:.1%} with the gates, "
        f"{t['ratio_without_gates']:.1%} without"
    )
    for n, r in enumerate(t["rounds"]):
        pipeline = r["pipeline"]
        print_gates(f"comparison {n + 1}", pipeline, r["raw"], pipeline.get("suites"))
    if "day" in result:
        day = result["day"]
        print_gates("day", day["pipeline"], day["raw"], day["pipeline"].get("suites"))
    if "day" in result:
        day = result["day"]
        print(
            f"day of {day['pipeline']['records']:,} records: Kafka -> gold "
            f"{day['pipeline']['seconds']:.0f}s (raw {day['raw']['seconds']:.0f}s, "
            f"ratio {day['ratio']:.1%}); backfill of the day {day['backfill']['seconds']:.0f}s; "
            f"produced in {day['produce_s']:.0f}s"
        )
    if "backfill" in result:
        from bench.batch_backfill import print_backfill

        print_backfill(result["backfill"])
    if "dag_pair" in result:
        pair = result["dag_pair"]
        print(f"hourly DAG pair through Airflow: {pair.get('seconds')}s (target <= 90 s)")
    if "day" in result:
        print(
            f"Kafka -> gold at the day's size: {result['day']['ratio']:.1%} of raw (target >= 20%)"
        )
    load = result["load_average"]
    print(
        f"load average: {load['before']} before, {load['during_mean']} mean / "
        f"{load['during_max']} max during (this run included)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
