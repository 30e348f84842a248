"""The reconciliation's cost per day of data, vs a plain driver loop doing the same reads.

Runs on the local platform (it brings Kafka and Cassandra up if needed). It
fills topics, a lake and a keyspace of its own with one simulated day
(:func:`bench.batch_throughput.simulated_day`, 1M events by default) built
and published as the hourly pipeline does (bronze, silver, the gates, gold,
publish: not timed), and copies the published gold rows into the speed
tables, as a speed layer that lost nothing would hold them, with a speed
watermark at the end of the day. Then, in one SparkSession and one process:

1. **raw**: a plain cassandra-driver loop reading the same partitions the
   reconciliation reads: every view's by-minute partition of both layers for
   each of the day's 1,440 windows (batch at the day's published version),
   prepared, 64 in flight, every row materialised; nothing compared;
2. **reconcile (core)**: what the step does per day of data: the possibly-late
   silver events through each view's build function
   (:func:`batch_layer.reconcile.late_rows`), then both layers' reads and the
   comparison of every row (:func:`batch_layer.reconcile.reconcile_view`);
   timed in two parts;
3. **reconcile (step)**: ``python -m batch_layer reconcile`` as the DAG task
   runs it, in this process (``now`` set to the day after, so the day is the
   window it compares): the ledger, the plan, the core, the report, the
   ``reconcile_results`` rows. Not repeatable (a passed run moves on), so
   it runs once, last.

Raw and core alternate for ``--rounds`` rounds after one untimed warm-up
read; the figures are the best round. Printed (a table and one JSON line)
and written to ``<out>/bench_reconcile.json``.

    .venv/bin/python -m bench.reconcile_cost --events 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.batch_throughput import DAY, Meter, _with_lake, produce_day, run_pipeline
from core.settings import KafkaSettings, Settings, load_settings
from platformctl import platform

PUBLISHED = ("bronze", "silver", "check_silver", "gold", "check_gold", "publish")
MINUTE_MS = 60_000


def _own(base: Settings, run: str, root: Path) -> Settings:
    """``base`` with topics, a keyspace and a lake (and quality reports) of this run."""
    prefix = f"bench.reconcile.{run}"
    kafka = base.kafka.model_dump() | {
        "events_topic": f"{prefix}.events",
        "dlq_topic": f"{prefix}.events.dlq",
        "suppressions_topic": f"{prefix}.suppressions",
    }
    return _with_lake(base, root).model_copy(
        update={
            "kafka": KafkaSettings(**kafka),
            "cassandra": base.cassandra.model_copy(update={"keyspace": f"bench_reconcile_{run}"}),
        }
    )


def fill_speed(spark: Any, settings: Settings, views: Any) -> dict[str, int]:
    """Copy every view's gold rows of the day into its speed tables (version 0), and record a
    speed watermark at the end of the day; rows per view."""
    from pyspark.sql import functions as F

    from batch_layer.gold import gold_path
    from core.cassandra import connect, execute_all, process_session, view_row_values
    from layout import PointerTables, ViewTables

    cassandra = settings.cassandra
    rows = {}
    for view in views:
        tables = ViewTables(view, cassandra.keyspace, "speed")
        gold = spark.read.format("delta").load(gold_path(settings, view))
        day = gold.where(F.col("window_date") == DAY.date())

        def write(part, tables=tables) -> None:
            session = process_session(cassandra)
            by_key = session.prepare(tables.insert_by_key())
            by_minute = session.prepare(tables.insert_by_minute())
            measures = [m.name for m in tables.spec.measures]
            now = datetime.now(UTC)
            keys, minutes = [], []
            for row in part:
                start, key, values = view_row_values(row, tables.spec.keys, measures)
                pair = tables.bind(start, key, values, written_by=(0, now, 0))
                keys.append(pair[0])
                minutes.append(pair[1])
            execute_all(session, by_key, keys)
            execute_all(session, by_minute, minutes)

        day.foreachPartition(write)
        rows[view.name] = day.count()
    cluster, session = connect(cassandra)
    try:
        insert = session.prepare(
            PointerTables(cassandra.keyspace).insert_progress(["watermark", "kafka_lag"])
        )
        for view in views:
            session.execute(insert, (view.name, DAY + timedelta(days=1), 0))
    finally:
        cluster.shutdown()
    return rows


def read_raw(session: Any, keyspace: str, views: Any, versions: dict[str, int]) -> int:
    """Every view's by-minute partitions of both layers for each window of the day; rows read."""
    from cassandra.concurrent import execute_concurrent_with_args

    from layout import ViewTables

    rows = 0
    windows = [DAY + timedelta(minutes=m) for m in range(1440)]
    for view in views:
        measures = [m.name for m in view.measures]
        batch = session.prepare(ViewTables(view, keyspace, "batch").select_minute(measures))
        speed = session.prepare(ViewTables(view, keyspace, "speed").select_minute(measures))
        version = versions[view.name]
        for statement, args in (
            (batch, [(w, version) for w in windows]),
            (speed, [(w,) for w in windows]),
        ):
            for _ok, result in execute_concurrent_with_args(
                session, statement, args, concurrency=64, raise_on_first_error=True
            ):
                rows += len(list(result))
    return rows


def run_core(spark: Any, settings: Settings, session: Any, views: Any, versions: dict) -> dict:
    """The reconciliation's work for the day: late rows, then reads and comparison per view."""
    from batch_layer.reconcile import late_rows, reconcile_view
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    started = time.perf_counter()
    late = late_rows(spark, settings, WEB_EVENTS, views, [DAY.date()])
    late_s = time.perf_counter() - started
    lo = int(DAY.timestamp() * 1000)
    found = {}
    for view in views:
        result = reconcile_view(
            session,
            settings.cassandra.keyspace,
            view,
            [(lo, lo + 1440 * MINUTE_MS)],
            batch_versions={DAY.date(): versions[view.name]},
            speed_version=0,
            late=late[view.name],
        )
        found[view.name] = result
    total = time.perf_counter() - started
    return {
        "late_seconds": round(late_s, 2),
        "compare_seconds": round(total - late_s, 2),
        "rows_compared": sum(r.rows_compared for r in found.values()),
        "rows_skipped_late": sum(r.rows_skipped_late for r in found.values()),
        "windows_differing": sum(r.windows_differing for r in found.values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reconcile_cost", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the day")
    parser.add_argument("--rounds", type=int, default=2, help="raw / core rounds")
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--out", type=Path, default=None, help="lake and artifacts (state dir)")
    parser.add_argument("--keep", action="store_true", help="keep the lake, topics, keyspace")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient

    from batch_layer.reconcile import reconcile
    from core.cassandra import connect, ensure_keyspace
    from core.spark import build_spark_session
    from ingest.topics import ensure_topics, platform_topics
    from layout import create_tables
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    base = load_settings()
    platform.up(base, ("kafka", "cassandra"))
    run = uuid.uuid4().hex[:8]
    out = args.out or base.local.state_dir
    root = out / "bench" / f"reconcile-{run}"
    settings = _own(base, run, root)
    admin = AdminClient(base.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    cluster, session = connect(base.cassandra)
    ensure_keyspace(session, settings.cassandra.keyspace, settings.cassandra.replication)
    create_tables(settings)
    load_before = os.getloadavg()
    print(f"[bench] run {run}, load average {load_before[0]:.2f}, lake {root}", flush=True)

    end = produce_day(settings, args.events, args.seed)

    spark = build_spark_session(base, app_name="bench-reconcile-cost")
    meter = Meter(spark)
    result: dict[str, Any] = {"run": run, "cores": os.cpu_count(), "records": sum(end.values())}
    views = WEB_EVENTS.view_specs
    try:
        print("[bench] building and publishing the day (not timed) ...", flush=True)
        build, _ = run_pipeline(spark, settings, PUBLISHED, "bench-build", meter)
        result["build_seconds"] = round(sum(s["seconds"] for s in build.values()), 1)
        result["rows_per_view"] = fill_speed(spark, settings, views)
        print(f"[bench] speed tables filled: {result['rows_per_view']}", flush=True)
        select = session.prepare(
            f"SELECT version FROM {settings.cassandra.keyspace}.batch_days "
            "WHERE view_name = ? AND day = ?"
        )
        versions = {v.name: session.execute(select, (v.name, DAY.date())).one()[0] for v in views}
        read_raw(session, settings.cassandra.keyspace, views, versions)  # warm-up

        raws, cores = [], []
        for n in range(args.rounds):
            raw: dict[str, Any] = {}
            with meter.measure(raw):
                raw["rows_read"] = read_raw(session, settings.cassandra.keyspace, views, versions)
            core: dict[str, Any] = {}
            with meter.measure(core):
                core |= run_core(spark, settings, session, views, versions)
            raws.append(raw)
            cores.append(core)
            print(f"[bench]   round {n + 1}: raw {raw['seconds']}s, core {core['seconds']}s")
        result["raw"] = min(raws, key=lambda r: r["seconds"])
        result["core"] = min(cores, key=lambda r: r["seconds"])
        result["core_rounds"] = [c["seconds"] for c in cores]
        result["raw_rounds"] = [r["seconds"] for r in raws]

        print("[bench] the reconcile step, as the DAG task runs it ...", flush=True)
        step_settings = settings.model_copy(
            update={
                "batch": settings.batch.model_copy(
                    # held_from = now - (ttl - margin) = the start of the day
                    update={"reconcile_ttl_margin_s": settings.speed.ttl_s - 26 * 3600}
                )
            }
        )
        step: dict[str, Any] = {}
        now = DAY + timedelta(hours=26)
        with meter.measure(step):
            done = reconcile(spark, step_settings, WEB_EVENTS, "bench-reconcile", now=now)
        step["windows_compared"] = sum(v["windows_compared"] for v in done.views.values())
        step["windows_differing"] = sum(v["windows_differing"] for v in done.views.values())
        result["step"] = step
        result["ratio"] = round(result["core"]["seconds"] / result["raw"]["seconds"], 2)
    finally:
        meter.stop()
        spark.stop()
        if not args.keep:
            admin.delete_topics(
                [
                    settings.kafka.events_topic,
                    settings.kafka.dlq_topic,
                    settings.kafka.suppressions_topic,
                ]
            )
            session.execute(f"DROP KEYSPACE IF EXISTS {settings.cassandra.keyspace}")
            shutil.rmtree(root, ignore_errors=True)
        cluster.shutdown()
    result["load_average"] = {
        "before": round(load_before[0], 2),
        "during_mean": round(statistics.fmean(meter.load), 2) if meter.load else None,
    }
    _print(result)
    path = out / "artifacts" / "bench_reconcile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, default=str))
    return 0


def _print(result: dict) -> None:
    raw, core, step = result["raw"], result["core"], result["step"]
    print(
        f"\n{'phase (one day)':<34} {'seconds':>8} {'JVM cores':>9} {'other cores':>11} {'jobs':>5}"
    )
    for name, phase in (
        ("raw driver reads (both layers)", raw),
        ("reconcile core", core),
        ("  late rows (silver, Spark)", {"seconds": core["late_seconds"]}),
        ("  reads + comparison", {"seconds": core["compare_seconds"]}),
        ("reconcile step (whole)", step),
    ):
        print(
            f"{name:<34} {phase['seconds']:>8.2f} {phase.get('jvm_cores', ''):>9} "
            f"{phase.get('other_cores', ''):>11} {phase.get('jobs', ''):>5}"
        )
    print(
        f"rows read {raw['rows_read']:,}; compared {core['rows_compared']:,}, skipped late "
        f"{core['rows_skipped_late']:,}, windows differing {core['windows_differing']}; "
        f"step compared {step['windows_compared']} windows; core / raw: {result['ratio']}x"
    )


if __name__ == "__main__":
    raise SystemExit(main())
