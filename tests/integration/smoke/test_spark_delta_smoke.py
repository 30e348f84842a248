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
