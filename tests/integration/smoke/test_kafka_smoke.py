"""Kafka is real: a keyed produce/consume round trip with confluent-kafka."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer

pytestmark = pytest.mark.integration


def test_produce_consume_round_trip(local_platform, kafka_topic):
    config = local_platform.kafka.client_config()
    producer = Producer(config | {"enable.idempotence": True, "acks": "all"})
    sent = {f"user-{i % 5}": [] for i in range(5)}
    for i in range(50):
        key = f"user-{i % 5}"
        value = f"event-{i}"
        sent[key].append(value)
        producer.produce(kafka_topic, key=key, value=value)
    assert producer.flush(30) == 0

    consumer = Consumer(
        config
        | {"group.id": kafka_topic, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    consumer.subscribe([kafka_topic])
    received: dict[str, list[str]] = {key: [] for key in sent}
    partition_of: dict[str, set[int]] = {key: set() for key in sent}
    try:
        for _ in range(200):
            if sum(map(len, received.values())) == 50:
                break
            message = consumer.poll(1.0)
            if message is None:
                continue
            assert message.error() is None, message.error()
            key = message.key().decode()
            received[key].append(message.value().decode())
            partition_of[key].add(message.partition())
    finally:
        consumer.close()

    # Every event arrived once, and one key's events stay in order on one partition.
    assert received == sent
    assert all(len(partitions) == 1 for partitions in partition_of.values())


def test_platform_topics_exist_with_declared_shape(local_platform, kafka_admin):
    from confluent_kafka.admin import ConfigResource

    from ingest.topics import pipeline_topics, platform_topics
    from pipelines import PIPELINES

    metadata = kafka_admin.list_topics(timeout=10)
    kafka = local_platform.kafka
    for spec in [*platform_topics(kafka), *pipeline_topics(kafka, PIPELINES)]:
        assert spec.name in metadata.topics
        assert len(metadata.topics[spec.name].partitions) == spec.partitions
        resource = ConfigResource("topic", spec.name)
        configs = kafka_admin.describe_configs([resource])[resource].result()
        for name, value in spec.config.items():  # retention, cleanup policy (compacted) ...
            assert configs[name].value == value, (spec.name, name)
