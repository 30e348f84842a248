"""``make demo``: bring the platform up, send website traffic, show what it answers.

At this stage the story is: the platform starts (Kafka, Cassandra, the
collector); the simulator sends realistic sessions through the collector,
with duplicates, skewed clocks and some invalid events; Spark reads the Kafka
log with the contract's schema into a Delta table, deduplicates on event_id
and counts page views per minute; the counts are upserted into Cassandra, read
back and compared with the simulator's ground truth. Later stages add the
speed layer, a batch DAG run and the merged serving answers.
"""

from __future__ import annotations

import json
import time
from collections import Counter

from core.settings import Settings
from platformctl import platform

__all__ = ["run_demo"]


def _say(step: str, text: str) -> None:
    print(f"[demo] {step:<10} {text}", flush=True)


def run_demo(settings: Settings, events: int = 3000) -> dict[str, int]:
    from core.spark import build_spark_session
    from ingest.simulator import SimulatorConfig, build_truth, generate, send
    from platformctl.install import install

    install(settings)
    timings = platform.up(settings)
    _say("platform", f"up: {timings} (seconds; 0.0 = already running)")
    for row in platform.status(settings):
        _say("status", f"{row.name}: pid {row.pid}, port {row.port}, {row.detail}")

    config = SimulatorConfig(
        seed=int(time.time()),
        events=events,
        rate=events / 60,
        duplicate_rate=0.03,
        skewed_client_rate=0.1,
        invalid_rate=0.02,
        late_rate=0.01,
    )
    source, write_key = next(iter(settings.collector.write_keys.items()))
    url = f"http://127.0.0.1:{settings.collector.port}"
    _say(
        "simulator",
        f"sending {events} events over ~60s (live clock, 3% duplicates, "
        "10% skewed clients, 2% invalid)",
    )
    report = send(
        generate(config),
        url,
        write_key.get_secret_value(),
        rate=config.rate,
        progress=True,
        time_mode="live",
    )
    truth = build_truth(list(report.events))
    _say(
        "collector",
        f"{report.sent} calls sent as source {source!r}: {report.accepted} "
        f"accepted, {report.rejected} dead-lettered "
        f"{dict(Counter(report.rejected_by_reason))}",
    )

    spark = build_spark_session(settings, app_name="demo")
    answer = _count_page_views(spark, settings, {e.message_id for e in report.events})
    expected = truth.page_views_per_minute
    _say(
        "spark",
        f"read {settings.kafka.events_topic} with the contract schema, deduplicated "
        f"on event_id: {sum(answer.values())} page views in {len(answer)} minutes",
    )
    stored = _upsert_and_read_back(settings, answer)
    _say(
        "cassandra",
        "page views per minute, upserted and read back: "
        + json.dumps(dict(sorted(stored.items())[-5:]))
        + " (last 5 minutes)",
    )
    moved = sum(abs(stored.get(m, 0) - expected.get(m, 0)) for m in expected | stored) // 2
    _say(
        "truth",
        f"ground truth: {sum(expected.values())} page views; platform: "
        f"{sum(stored.values())}; per minute equal except {moved} event(s) that "
        "network latency moved across a minute boundary",
    )
    if sum(stored.values()) != sum(expected.values()):
        raise RuntimeError(f"Demo answer differs from the ground truth: {stored} != {expected}")
    _show_speed_view(settings, expected, report.events)
    _say(
        "done",
        f"`make status` shows the services; the collector listens on {url}; "
        "`make down` stops everything.",
    )
    return stored


def _count_page_views(spark, settings: Settings, message_ids: set[str]) -> dict[str, int]:
    from pyspark.sql import functions as F

    from speed_layer.job import parse_events

    raw = (
        spark.read.format("kafka")
        .options(**settings.kafka.spark_options())
        .option("subscribe", settings.kafka.events_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    table = f"{settings.lake.root}/demo/events"
    parse_events(raw).write.format("delta").mode("overwrite").save(table)
    events = spark.read.format("delta").load(table)
    this_run = events.where(F.col("event_id").isin(list(message_ids)))
    per_minute = (
        this_run.dropDuplicates(["event_id"])
        .where(F.col("type") == "page")
        .groupBy(
            F.date_format(F.date_trunc("minute", "event_time"), "yyyy-MM-dd'T'HH:mm:00'Z'").alias(
                "minute"
            )
        )
        .count()
        .collect()
    )
    return {row.minute: row["count"] for row in per_minute}


def _upsert_and_read_back(settings: Settings, per_minute: dict[str, int]) -> dict[str, int]:
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    keyspace = settings.cassandra.keyspace
    try:
        session.execute(
            f"CREATE TABLE IF NOT EXISTS {keyspace}.demo_page_views_per_minute "
            "(minute text PRIMARY KEY, views bigint)"
        )
        upsert = session.prepare(
            f"INSERT INTO {keyspace}.demo_page_views_per_minute (minute, views) VALUES (?, ?)"
        )
        read = session.prepare(
            f"SELECT views FROM {keyspace}.demo_page_views_per_minute WHERE minute = ?"
        )
        for minute, views in per_minute.items():
            session.execute(upsert, (minute, views))
        return {minute: session.execute(read, (minute,)).one().views for minute in per_minute}
    finally:
        cluster.shutdown()


def _show_speed_view(settings: Settings, expected: dict[str, int], sent) -> None:
    """Wait for the speed layer to catch up, then compare its live view with the truth."""
    from datetime import UTC, datetime

    from core.cassandra import connect

    newest = max(e.time for e in sent)
    cluster, session = connect(settings.cassandra)
    keyspace = settings.cassandra.keyspace
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            row = session.execute(
                f"SELECT max_event_time FROM {keyspace}.speed_progress "
                "WHERE view_name = 'site_activity'"
            ).one()
            seen = row and row.max_event_time and row.max_event_time.replace(tzinfo=UTC)
            if seen and seen >= newest.replace(microsecond=0):
                break
            time.sleep(2)
        live: dict[str, int] = {}
        select = session.prepare(
            f"SELECT window_start, page_views FROM {keyspace}.speed_site_activity "
            "WHERE site = 'all' AND day = ?"
        )
        for day in {datetime.fromisoformat(m.replace("Z", "+00:00")).date() for m in expected}:
            for row in session.execute(select, (day,)):
                minute = row.window_start.strftime("%Y-%m-%dT%H:%M:00Z")
                if minute in expected:
                    live[minute] = row.page_views
    finally:
        cluster.shutdown()
    missing = sum(expected.values()) - sum(live.values())
    _say(
        "speed",
        f"live view in Cassandra (streaming, seconds behind): {sum(live.values())} "
        f"page views in the same minutes; {missing} not (yet) there: events later than "
        "the watermark are left to the batch layer",
    )
