"""Bronze on the real Kafka and Delta: every offset exactly once, whatever the reruns."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from batch_layer.bronze import bronze_as_of, committed_range, ingest_bronze
from core.settings import KafkaSettings, LakeSettings
from tests.support.web import WEB_EVENTS

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
    first = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    assert (first.run, first.rows, first.skipped) == (1, 30, False)

    # Nothing new: no rows, a newer as_of only.
    again = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    assert again.skipped and again.rows == 0

    _produce(bronze_settings, 30, 12)
    second = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
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
    stale = bronze.committed_range(spark, bronze.bronze_path(bronze_settings, WEB_EVENTS))
    assert ingest_bronze(spark, bronze_settings, WEB_EVENTS).rows == 20
    # The racing run still believes nothing was committed.
    monkeypatch.setattr(bronze, "committed_range", lambda *_: stale)
    racer = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    assert racer.skipped and racer.rows == 0
    assert spark.read.format("delta").load(racer.path).count() == 20


def test_a_quiet_run_touching_after_a_racing_append_does_not_roll_the_run_back(
    spark, bronze_settings, monkeypatch
):
    """A quiet run fixes its (empty) range, a racing run appends run 2, then the quiet
    run's empty commit lands carrying run 1: the next run must still be run 3."""
    import batch_layer.bronze as bronze

    _produce(bronze_settings, 0, 10)
    first = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    real_stable_end = bronze.stable_end
    raced: list = []

    def stable_end_then_race(settings, topic, *args, **kwargs):
        end = real_stable_end(settings, topic, *args, **kwargs)
        if not raced:  # the quiet run saw nothing new; now the racer commits run 2
            raced.append(None)
            _produce(bronze_settings, 10, 5)
            raced.append(ingest_bronze(spark, bronze_settings, WEB_EVENTS))
        return end

    monkeypatch.setattr(bronze, "stable_end", stable_end_then_race)
    quiet = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    racer = raced[1]
    assert quiet.skipped and quiet.run == 1
    assert (racer.run, racer.rows) == (2, 5)
    assert committed_range(spark, first.path) == (2, racer.end)
    monkeypatch.setattr(bronze, "stable_end", real_stable_end)

    _produce(bronze_settings, 15, 7)
    third = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    assert (third.run, third.rows, third.skipped) == (3, 7, False)
    assert third.start == racer.end
    assert spark.read.format("delta").load(first.path).count() == 22


def test_a_quiet_run_records_a_newer_as_of(spark, bronze_settings):
    """Nothing new in Kafka: bronze still holds the whole log up to the quiet run's start,
    so the boundary may move while the site is quiet."""
    _produce(bronze_settings, 0, 5)
    first = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    after_first = bronze_as_of(spark, first.path)
    quiet = ingest_bronze(spark, bronze_settings, WEB_EVENTS)
    assert quiet.skipped and quiet.run == 1
    assert bronze_as_of(spark, first.path) > after_first
    assert committed_range(spark, first.path) == (1, first.end)


def test_the_first_run_starts_after_records_retention_deleted_and_records_the_gap(
    spark, bronze_settings, kafka_admin, caplog
):
    import json
    import logging

    from confluent_kafka import TopicPartition
    from delta.tables import DeltaTable

    topic = bronze_settings.kafka.events_topic
    producer = Producer(bronze_settings.kafka.client_config())
    for i in range(10):
        producer.produce(topic, value=f"event-{i}", partition=0)
    assert producer.flush(30) == 0
    deleted = kafka_admin.delete_records([TopicPartition(topic, 0, 6)])
    for future in deleted.values():
        assert future.result().low_watermark == 6

    with caplog.at_level(logging.WARNING, logger="batch_layer.bronze"):
        run = ingest_bronze(spark, bronze_settings, WEB_EVENTS)

    assert (run.run, run.rows, run.skipped) == (1, 4, False)
    assert run.start == {0: 6, 1: 0, 2: 0} and run.gap == {0: (0, 6)}
    table = spark.read.format("delta").load(run.path)
    assert sorted(r.value.decode() for r in table.collect()) == [f"event-{i}" for i in range(6, 10)]
    commit = DeltaTable.forPath(spark, run.path).history().where("operation = 'WRITE'").collect()
    assert json.loads(commit[0].userMetadata)["gap"] == {"0": [0, 6]}
    (logged,) = [r for r in caplog.records if r.getMessage() == "bronze.retention_gap"]
    assert logged.fields["lost"] == 6 and logged.fields["gap"] == {0: [0, 6]}
