"""The second pipeline, final: the checkout service's records through the real batch layer.

The simulated checkout service produces its records (duplicates, late, out of order, broken
records) straight to this test's topic with confluent-kafka; the batch steps run in-process
for the ``checkouts`` declaration exactly as for web events; gold and the published batch
view equal the simulator's ground truth, and the gate reconciles orders and refunds.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batch_layer.__main__ import PIPELINE_STEPS, run_step
from batch_layer.gold import gold_path
from core.settings import BatchSettings, KafkaSettings, LakeSettings, Settings
from pipelines import pipeline
from pipelines.simulators.checkouts import CheckoutConfig, build_truth, generate, produce
from tests.support.checkouts import assert_orders_equal_truth

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKOUTS = pipeline("checkouts")


@pytest.fixture
def checkout_settings(local_platform: Settings, kafka_topic, cassandra_keyspace, tmp_path):
    """This test's topic for the checkouts pipeline, its lake and keyspace with the
    pipeline's tables."""
    from layout import create_tables

    kafka = KafkaSettings(
        **local_platform.kafka.model_dump()
        | {"topics": {CHECKOUTS.name: kafka_topic}, "events_topic": f"{kafka_topic}.web"}
    )
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "batch": BatchSettings(reports_dir=tmp_path / "quality", lateness_s=60),
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            ),
        }
    )
    create_tables(settings, CHECKOUTS.view_specs)
    return settings


def test_checkouts_gold_and_published_view_equal_the_service_s_truth(
    spark, checkout_settings, cassandra_session
):
    settings = checkout_settings
    records = generate(
        CheckoutConfig(
            seed=3,
            events=800,
            start=datetime(2024, 6, 1, 23, 40, tzinfo=UTC),
            rate=0.3,  # forty-four minutes across midnight: two event days
            refund_rate=0.08,
            duplicate_rate=0.05,
            late_rate=0.05,
            late_by_s=1800,
            out_of_order_rate=0.1,
            invalid_rate=0.03,
        )
    )
    truth = build_truth(records)
    produce(records, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))

    results = {
        step: run_step(spark, settings, step, CHECKOUTS, "checkouts-1", None)
        for step in PIPELINE_STEPS
    }
    assert results["check_silver"].passed and results["check_gold"].passed
    assert len(results["silver"].dates) == 2

    gold = spark.read.format("delta").load(gold_path(settings, CHECKOUTS.view_specs[0]))
    got = {
        (r.window_start.strftime("%Y-%m-%dT%H:%M:00Z"), r.currency): r
        for r in gold.select(
            "window_start", "currency", "orders", "refunds", "revenue_minor"
        ).collect()
    }
    assert_orders_equal_truth(got, truth)

    keyspace = settings.cassandra.keyspace
    versions = {
        r.day.date(): r.version
        for r in cassandra_session.execute(
            f"SELECT day, version FROM {keyspace}.batch_days WHERE view_name = %s",
            ("orders_by_currency",),
        )
    }
    published = {}
    for row in cassandra_session.execute(
        f"SELECT currency, day, version, window_start, orders FROM "
        f"{keyspace}.batch_orders_by_currency"
    ):
        if versions.get(row.day.date()) == row.version:
            published[row.window_start.strftime("%Y-%m-%dT%H:%M:00Z"), row.currency] = row.orders
    assert published == {key: cell.orders for key, cell in truth.by_minute.items()}
