"""Spark is real: batch-read a Kafka topic with the Kafka connector, round-trip Delta."""

from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration


def test_kafka_to_delta_round_trip(local_platform, spark, kafka_topic, tmp_path):
    producer = Producer(local_platform.kafka.client_config())
    events = [{"event_id": f"e{i}", "page": f"/p{i % 4}"} for i in range(40)]
    for event in events:
        producer.produce(kafka_topic, key=event["page"], value=json.dumps(event))
    assert producer.flush(30) == 0

    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", local_platform.kafka.bootstrap_servers)
        .option("subscribe", kafka_topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    assert raw.count() == len(events)

    table = str(tmp_path / "bronze")
    raw.selectExpr("CAST(value AS STRING) AS value", "partition", "offset").write.format(
        "delta"
    ).save(table)
    back = spark.read.format("delta").load(table)
    got = sorted(json.loads(row.value)["event_id"] for row in back.collect())
    assert got == sorted(e["event_id"] for e in events)
    # Delta really wrote a transaction log, one commit.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert [h.operation for h in history] == ["WRITE"]


def test_kafka_streaming_read_into_delta(local_platform, spark, kafka_topic, tmp_path):
    """The connector's streaming path (used by the speed layer) with a Delta sink."""
    producer = Producer(local_platform.kafka.client_config())
    for i in range(25):
        producer.produce(kafka_topic, key=str(i), value=f"v{i}")
    assert producer.flush(30) == 0

    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", local_platform.kafka.bootstrap_servers)
        .option("subscribe", kafka_topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("delta")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(str(tmp_path / "stream"))
    )
    query.awaitTermination(120)
    assert query.exception() is None
    values = {
        row.value for row in spark.read.format("delta").load(str(tmp_path / "stream")).collect()
    }
    assert values == {f"v{i}" for i in range(25)}


def test_the_driver_maps_the_class_archive_install_made(spark, local_platform):
    """``make install`` archives the classes a driver loads (``platformctl.class_archive``);
    local drivers start with it, and it fits their JVM and class path (a JVM told
    ``-Xshare:on`` refuses to start with an archive it cannot map)."""
    import subprocess
    from pathlib import Path

    from core.spark import local_class_archive

    archive = local_class_archive(local_platform.local.state_dir)
    jvm = spark._jvm
    runtime = jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    java = Path(jvm.System.getProperty("java.home")) / "bin" / "java"
    classpath = jvm.System.getProperty("java.class.path")
    strict = [str(java), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath]
    check = subprocess.run([*strict, "-version"], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    other = subprocess.run(
        [*strict[:-1], "/other.jar", "-version"], capture_output=True, text=True, timeout=60
    )
    assert other.returncode != 0  # the check can fail: another class path is refused
