"""The cost of forgetting one user in a day of events, vs a plain Delta ``DELETE``.

Runs on the local platform (it brings Kafka up if needed; nothing is
published, so Cassandra is not used). It fills topics of its own with one
simulated day (:func:`bench.batch_throughput.simulated_day`, 1M events by
default), builds the lake from them as the hourly pipeline does (bronze,
silver, the gates, gold: not timed), and picks the user with the most events
of the day. Then, in one SparkSession:

1. **raw**: the plain engine's erasure of that user from shallow clones of
   bronze and silver taken before step 2 (copy-on-write, deletion vectors
   off): ``DELETE WHERE userId = ID OR anonymousId = ID`` on silver and the
   same on bronze's JSON value (``get_json_object``). The least a lake must
   do; no suppression, no rejects, no purge, no recompute;
2. **forget**: the ``forget`` step as ``python -m batch_layer forget`` runs it
   (suppression recorded, bronze, silver's rejects and silver erased with
   deletion vectors, then ``REORG ... APPLY (PURGE)``, the days queued);
3. **republish**: what the ``<pipeline>_forget`` DAG runs next,
   ``check_silver``, ``gold``, ``check_gold`` (``publish`` is left out: no
   Cassandra).

Each erasure is checked afterwards: no row of the user is left, every other
row is. Figures per phase: seconds, Spark JVM cores, Spark jobs, rows
deleted, files removed and added (Delta's ``operationMetrics``). They are
printed (a table and one JSON line) and written to
``.platform/artifacts/bench_forget.json``.

    .venv/bin/python -m bench.forget_cost --events 1000000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import uuid
from typing import Any

from bench.batch_throughput import (
    PIPELINE,
    Meter,
    _with_lake,
    produce_day,
    run_pipeline,
)
from core.settings import KafkaSettings, Settings, load_settings
from platformctl import platform

REPUBLISH = ("check_silver", "gold", "check_gold")


def _own_topics(base: Settings, run: str) -> Settings:
    """``base`` with events, dead letters and the suppression list on topics of this run."""
    prefix = f"bench.forget.{run}"
    kafka = base.kafka.model_dump() | {
        "events_topic": f"{prefix}.events",
        "dlq_topic": f"{prefix}.events.dlq",
        "suppressions_topic": f"{prefix}.suppressions",
    }
    return base.model_copy(update={"kafka": KafkaSettings(**kafka)})


def busiest_user(spark: Any, silver: str) -> tuple[str, int]:
    """The identity (``userId``, else ``anonymousId``) with the most silver rows, and its count."""
    from pyspark.sql import functions as F

    row = (
        spark.read.format("delta")
        .load(silver)
        .groupBy(F.coalesce("userId", "anonymousId").alias("who"))
        .count()
        .orderBy(F.desc("count"), "who")
        .first()
    )
    return row.who, row["count"]


def _user_rows(spark: Any, path: str, user: str, raw_column: str | None = None) -> tuple[int, int]:
    """(rows of ``user``, all rows) of the Delta table at ``path``."""
    from pyspark.sql import functions as F

    table = spark.read.format("delta").load(path)
    if raw_column is None:
        ids = [F.col("userId"), F.col("anonymousId")]
    else:
        text = F.col(raw_column).cast("string")
        ids = [F.get_json_object(text, "$.userId"), F.get_json_object(text, "$.anonymousId")]
    mine = F.coalesce(ids[0] == user, F.lit(False)) | F.coalesce(ids[1] == user, F.lit(False))
    counts = table.agg(F.sum(mine.cast("long")).alias("mine"), F.count("*").alias("all")).first()
    return int(counts.mine or 0), int(counts["all"])


def _commits_since(spark: Any, path: str, version: int) -> list[tuple[str, dict]]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    history = DeltaTable.forPath(spark, path).history()
    return [
        (c.operation, c.operationMetrics or {})
        for c in history.where(F.col("version") > version).orderBy("version").collect()
    ]


def _version(spark: Any, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).collect()[0].version


def run_raw(spark: Any, clones: dict[str, str], user: str, meter: Meter) -> dict:
    """Plain copy-on-write ``DELETE`` of ``user`` from the bronze and silver clones."""
    from batch_layer.forget import erasure_of

    literal = user.replace("'", "''")
    predicates = {
        "bronze": " OR ".join(
            f"get_json_object(CAST(value AS STRING), '$.{f}') = '{literal}'"
            for f in ("userId", "anonymousId")
        ),
        "silver": f"userId = '{literal}' OR anonymousId = '{literal}'",
    }
    before = {name: _version(spark, path) for name, path in clones.items()}
    phase: dict[str, Any] = {}
    with meter.measure(phase):
        for name, path in clones.items():
            spark.sql(f"DELETE FROM delta.`{path}` WHERE {predicates[name]}")
    phase["tables"] = {
        name: erasure_of(_commits_since(spark, path, before[name])).__dict__
        for name, path in clones.items()
    }
    return phase


def _clone(spark: Any, source: str, target: str) -> None:
    spark.sql(f"CREATE TABLE delta.`{target}` SHALLOW CLONE delta.`{source}`")
    spark.sql(
        f"ALTER TABLE delta.`{target}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')"
    )


def _check_erased(
    spark: Any,
    label: str,
    path: str,
    user: str,
    before: tuple[int, int],
    raw_column: str | None = None,
) -> None:
    mine, total = _user_rows(spark, path, user, raw_column)
    if mine != 0 or total != before[1] - before[0]:
        raise RuntimeError(
            f"{label}: {mine} rows of the user left, {total} rows in all "
            f"(expected 0 and {before[1] - before[0]})."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.forget_cost", description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000, help="events of the day")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--keep", action="store_true", help="keep the bench lake and topics")
    args = parser.parse_args(argv)

    from confluent_kafka.admin import AdminClient

    from batch_layer.bronze import bronze_path
    from batch_layer.runner import run_step
    from batch_layer.silver import silver_path
    from core.spark import build_spark_session
    from ingest.topics import ensure_topics, platform_topics
    from pipelines import collector_pipeline

    WEB_EVENTS = collector_pipeline()

    base = load_settings()
    platform.up(base, ("kafka",))
    run = uuid.uuid4().hex[:8]
    root = base.local.state_dir / "bench" / f"forget-{run}"
    settings = _with_lake(_own_topics(base, run), root)
    admin = AdminClient(base.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    load_before = os.getloadavg()
    print(f"[bench] run {run}, load average {load_before[0]:.2f}, lake {root}", flush=True)

    end = produce_day(settings, args.events, args.seed)

    spark = build_spark_session(base, app_name="bench-forget-cost")
    meter = Meter(spark)
    result: dict[str, Any] = {"run": run, "cores": os.cpu_count(), "records": sum(end.values())}
    try:
        print("[bench] building the lake (bronze, silver, gates, gold; not timed) ...", flush=True)
        build, _ = run_pipeline(spark, settings, PIPELINE, "bench-build", meter)
        result["build_seconds"] = round(sum(s["seconds"] for s in build.values()), 1)
        paths = {
            "bronze": bronze_path(settings, WEB_EVENTS),
            "silver": silver_path(settings, WEB_EVENTS),
        }
        user, events_of_user = busiest_user(spark, paths["silver"])
        files = {
            name: spark.sql(f"DESCRIBE DETAIL delta.`{p}`").first().numFiles
            for name, p in paths.items()
        }
        counts = {
            "bronze": _user_rows(spark, paths["bronze"], user, "value"),
            "silver": _user_rows(spark, paths["silver"], user),
        }
        result |= {"user_events": events_of_user, "files_before": files, "rows_before": counts}
        print(f"[bench] forgetting the busiest user: {events_of_user} events; files {files}")

        clones = {name: str(root / f"raw-{name}") for name in paths}
        for name, path in paths.items():
            _clone(spark, path, clones[name])
        print("[bench] raw: plain DELETE on shallow clones ...", flush=True)
        result["raw"] = run_raw(spark, clones, user, meter)
        print(f"[bench]   raw: {result['raw']['seconds']:.1f}s", flush=True)

        print("[bench] forget, as python -m batch_layer forget runs it ...", flush=True)
        forget: dict[str, Any] = {}
        with meter.measure(forget):
            report = run_step(spark, settings, "forget", WEB_EVENTS, "bench-forget", None, user)
        forget["report"] = report.report()
        result["forget"] = forget
        print(f"[bench]   forget: {forget['seconds']:.1f}s", flush=True)
        steps, _ = run_pipeline(spark, settings, REPUBLISH, "bench-forget", meter)
        result["republish"] = {
            "seconds": round(sum(s["seconds"] for s in steps.values()), 2),
            "steps": steps,
        }

        for name, path in paths.items():
            column = "value" if name == "bronze" else None
            _check_erased(spark, name, path, user, counts[name], column)
            _check_erased(spark, f"raw {name}", clones[name], user, counts[name], column)
        result["ratio"] = round(forget["seconds"] / result["raw"]["seconds"], 2)
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
            shutil.rmtree(root, ignore_errors=True)
    result["load_average"] = {
        "before": round(load_before[0], 2),
        "during_mean": round(statistics.fmean(meter.load), 2) if meter.load else None,
    }
    _print(result)
    out = base.local.state_dir / "artifacts" / "bench_forget.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str))
    print(json.dumps(result, default=str))
    return 0


def _print(result: dict) -> None:
    tables = result["forget"]["report"]["tables"]
    print(
        f"\n{'phase':<30} {'seconds':>8} {'JVM cores':>9} {'jobs':>5}  rows / files -removed +added"
    )
    rows = [
        ("raw DELETE (bronze + silver)", result["raw"], result["raw"]["tables"]),
        ("forget step", result["forget"], tables),
        ("republish (gates + gold)", result["republish"], {}),
    ]
    rows += [(f"  {step}", s, {}) for step, s in result["republish"]["steps"].items()]
    for name, phase, per_table in rows:
        detail = ", ".join(
            f"{t} {v['rows_deleted']} / -{v['files_removed']} +{v['files_added']}"
            for t, v in per_table.items()
        )
        print(
            f"{name:<30} {phase['seconds']:>8.1f} {phase.get('jvm_cores', ''):>9} "
            f"{phase.get('jobs', ''):>5}  {detail}"
        )
    print(f"forget / raw: {result['ratio']}x; files before: {result['files_before']}")


if __name__ == "__main__":
    raise SystemExit(main())
