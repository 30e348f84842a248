"""``make demo``: bring the platform up and run the path end to end, saying what it does.

At this stage the demo proves every real part together: events go into the
Kafka log, Spark reads the log with the Kafka connector into a Delta table,
a per-page count is upserted into Cassandra and read back, and Airflow's DAGs
load. Later stages grow this into the full story (collector, speed layer,
batch DAG run, merged answers).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime

from core.settings import Settings
from platformctl import platform

__all__ = ["run_demo"]


def _say(step: str, text: str) -> None:
    print(f"[demo] {step:<10} {text}", flush=True)


def run_demo(settings: Settings, events: int = 500) -> dict[str, int]:
    from confluent_kafka import Producer

    from core.cassandra import connect
    from core.spark import build_spark_session
    from platformctl.install import install

    install(settings)
    timings = platform.up(settings)
    _say("platform", f"up: {timings} (seconds; 0.0 = already running)")
    for row in platform.status(settings):
        _say("status", f"{row.name}: pid {row.pid}, port {row.port}, {row.detail}")

    run_id = uuid.uuid4().hex[:8]
    # A topic of its own: the events topic takes only contract-validated events.
    topic = "platform.demo.smoke"
    from confluent_kafka.admin import AdminClient

    from ingest.topics import TopicSpec, ensure_topics

    ensure_topics(
        AdminClient(settings.kafka.client_config()),
        [TopicSpec(topic, 1, settings.kafka.replication_factor, {"retention.ms": "86400000"})],
    )
    producer = Producer(
        settings.kafka.client_config() | {"enable.idempotence": True, "acks": "all"}
    )
    pages = ["/", "/pricing", "/docs", "/blog", "/signup"]
    now = datetime.now(UTC).isoformat()
    for i in range(events):
        user = f"demo-{run_id}-user-{i % 37}"
        event = {
            "messageId": f"{run_id}-{i}",
            "type": "page",
            "anonymousId": user,
            "properties": {"path": pages[i % len(pages)]},
            "timestamp": now,
            "demo_run": run_id,
        }
        producer.produce(topic, key=user, value=json.dumps(event))
    producer.flush(30)
    _say("kafka", f"produced {events} page events to {topic} (run {run_id}), acks=all")

    spark = build_spark_session(settings, app_name="demo")
    from pyspark.sql import functions as F

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    mine = raw.select(F.col("value").cast("string").alias("value"), "partition", "offset").where(
        F.get_json_object("value", "$.demo_run") == run_id
    )
    table = f"{settings.lake.root}/demo/raw_events"
    started = time.monotonic()
    mine.write.format("delta").mode("append").save(table)
    stored = (
        spark.read.format("delta")
        .load(table)
        .where(F.get_json_object("value", "$.demo_run") == run_id)
    )
    _say(
        "delta",
        f"Spark read the log and appended {stored.count()} rows to {table} "
        f"({time.monotonic() - started:.1f}s)",
    )
    per_page = {
        row.path: row.views
        for row in stored.groupBy(F.get_json_object("value", "$.properties.path").alias("path"))
        .agg(F.count("*").alias("views"))
        .collect()
    }

    cluster, session = connect(settings.cassandra)
    try:
        keyspace = settings.cassandra.keyspace
        session.execute(
            f"CREATE TABLE IF NOT EXISTS {keyspace}.demo_page_views "
            "(run text, path text, views bigint, PRIMARY KEY ((run), path))"
        )
        upsert = session.prepare(
            f"INSERT INTO {keyspace}.demo_page_views (run, path, views) VALUES (?, ?, ?)"
        )
        for path, views in per_page.items():
            session.execute(upsert, (run_id, path, views))
        read = session.prepare(f"SELECT path, views FROM {keyspace}.demo_page_views WHERE run = ?")
        answer = {row.path: row.views for row in session.execute(read, (run_id,))}
    finally:
        cluster.shutdown()
    _say("cassandra", f"page views per path, upserted and read back: {answer}")
    if answer != per_page or sum(answer.values()) != events:
        raise RuntimeError(f"Demo answer {answer} does not match what was sent ({events}).")
    _say(
        "done",
        f"{events} events sent = {sum(answer.values())} counted. "
        "`make status` shows the services; `make down` stops them.",
    )
    return answer
