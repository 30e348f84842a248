"""Bronze on the real Kafka and Delta: every offset exactly once, whatever the reruns."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from batch_layer.bronze import committed_range, ingest_bronze
from core.settings import KafkaSettings, LakeSettings

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def bronze_settings(local_platform, kafka_topic, tmp_path):
    kafka = KafkaSettings(**(local_platform.kafka.model_dump() | {"events_topic": kafka_topic}))
    return local_platform.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
        }
    )


def _produce(settings, start: int, count: int) -> None:
    producer = Producer(settings.kafka.client_config())
    for i in range(start, start + count):
        producer.produce(
            settings.kafka.events_topic,
            key=f"user-{i % 7}",
            value=f"event-{i}",
            headers=[("contract", b"web-events/1.0.0")],
        )
    assert producer.flush(30) == 0


def test_reruns_append_each_offset_exactly_once(spark, bronze_settings):
    _produce(bronze_settings, 0, 30)
    first = ingest_bronze(spark, bronze_settings)
    assert (first.run, first.rows, first.skipped) == (1, 30, False)

    again = ingest_bronze(spark, bronze_settings)  # nothing new: no rows, a newer as_of only
    assert again.skipped and again.rows == 0

    _produce(bronze_settings, 30, 12)
    second = ingest_bronze(spark, bronze_settings)
    assert (second.run, second.rows) == (2, 12)
    assert second.start == first.end

    table = spark.read.format("delta").load(first.path)
    values = sorted(int(r.value.decode().split("-")[1]) for r in table.select("value").collect())
    assert values == list(range(42))
    assert table.select("partition", "offset").distinct().count() == 42
    row = table.where("value = CAST('event-3' AS BINARY)").collect()[0]
    assert row.key == b"user-3" and row.headers[0].key == "contract"
    assert committed_range(spark, first.path) == (2, second.end)


def test_a_racing_duplicate_run_is_skipped_by_delta(spark, bronze_settings, monkeypatch):
    """Two runs that computed the same range: the second commit carries the same
    txnVersion and Delta drops it."""
    import batch_layer.bronze as bronze

    _produce(bronze_settings, 0, 20)
    stale = bronze.committed_range(spark, bronze.bronze_path(bronze_settings))
    assert ingest_bronze(spark, bronze_settings).rows == 20
    # The racing run still believes nothing was committed.
    monkeypatch.setattr(bronze, "committed_range", lambda *_: stale)
    racer = ingest_bronze(spark, bronze_settings)
    assert racer.skipped and racer.rows == 0
    assert spark.read.format("delta").load(racer.path).count() == 20
