"""The second pipeline, final: the checkout service's records through the real batch layer.

The simulated checkout service produces its records (duplicates, late, out of order, broken
records) straight to this test's topic with confluent-kafka; the batch steps run in-process
for the ``checkouts`` declaration exactly as for web events; gold and the published batch
view equal the simulator's ground truth, and the gate reconciles orders and refunds.

Meanwhile web events' silver gate has failed (a contract violation in its silver): that
holds web events' gold and boundary, and neither checkouts' run nor its boundary.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from batch_layer.gold import GateNotPassed, gold_path
from batch_layer.runner import run_step
from batch_layer.steps import THROUGH_PUBLISH
from core.settings import BatchSettings, KafkaSettings, LakeSettings, Settings
from layout import read_boundaries
from pipelines import collector_pipeline, pipeline
from pipelines.simulators.checkouts import CheckoutConfig, build_truth, generate, produce
from tests.support.checkouts import assert_orders_equal_truth

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKOUTS = pipeline("checkouts")
WEB_EVENTS = collector_pipeline()


@pytest.fixture
def checkout_settings(local_platform: Settings, kafka_topic, cassandra_keyspace, tmp_path):
    """This test's topic for the checkouts pipeline, its lake and keyspace with the
    pipeline's tables."""
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics
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
    admin = AdminClient(kafka.client_config())
    web_topic = [t for t in platform_topics(kafka) if t.name == kafka.events_topic]
    ensure_topics(admin, web_topic)
    yield settings
    admin.delete_topics([kafka.events_topic])


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
    _fail_web_events_gate(spark, settings)

    results = {
        step: run_step(spark, settings, step, CHECKOUTS, "checkouts-1", None)
        for step in THROUGH_PUBLISH
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

    # Web events' failed gate still holds its own run, and only its own.
    with pytest.raises(GateNotPassed):
        run_step(spark, settings, "gold", WEB_EVENTS, "web-bad", None)
    boundaries = read_boundaries(settings.cassandra, ["orders_by_currency", *WEB_EVENTS.views])
    assert boundaries["orders_by_currency"] is not None
    assert all(boundaries[view] is None for view in WEB_EVENTS.views), boundaries


def _fail_web_events_gate(spark, settings: Settings) -> None:
    """Web events' bronze and silver over a few valid events, then a contract violation in
    its silver: its gate fails (as in ``test_pipeline``)."""
    from pyspark.sql import functions as F

    from batch_layer.quality import QualityGateFailed
    from batch_layer.silver import silver_path
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct

    produce_direct(
        generate(
            SimulatorConfig(seed=5, events=20, start=datetime(2024, 6, 1, 23, 50, tzinfo=UTC))
        ),
        settings,
    )
    run_step(spark, settings, "bronze", WEB_EVENTS, "web-bad", None)
    run_step(spark, settings, "silver", WEB_EVENTS, "web-bad", None)
    path = silver_path(settings, WEB_EVENTS)
    silver = spark.read.format("delta").load(path)
    bad = silver.limit(2).withColumn("type", F.lit("teleport"))
    bad.write.format("delta").mode("append").save(path)
    with pytest.raises(QualityGateFailed):
        run_step(spark, settings, "check_silver", WEB_EVENTS, "web-bad", None)


@pytest.mark.parametrize("speed_streams_it", [False, True], ids=["no speed layer", "speed layer"])
def test_a_pipeline_whose_topic_holds_nothing_yet_runs_every_step(
    spark, checkout_settings, cassandra_session, speed_streams_it
):
    """A team's pipeline is declared before its service sends a record: its hourly runs
    succeed with nothing, and bronze records the empty range as its first run. Without a
    speed layer its boundary follows the ``as_of`` rule, as after a quiet hour; with one that
    has counted nothing yet (its watermark is the epoch) it gets no boundary, rather than one
    of 1970 that readers would read speed rows from."""
    from batch_layer.bronze import bronze_path, bronze_state
    from batch_layer.publish import boundary_for

    settings = checkout_settings
    if speed_streams_it:  # as the speed layer records progress before its first event
        cassandra_session.execute(
            f"INSERT INTO {settings.cassandra.keyspace}.speed_progress "
            "(view_name, watermark, heartbeat_at, kafka_lag) VALUES (%s, %s, %s, 0)",
            ("orders_by_currency", datetime(1970, 1, 1, tzinfo=UTC), datetime.now(UTC)),
        )
    results = {
        step: run_step(spark, settings, step, CHECKOUTS, "checkouts-empty", None)
        for step in THROUGH_PUBLISH
    }
    run, end, as_of = bronze_state(spark, bronze_path(settings, CHECKOUTS))
    assert (results["bronze"].run, run, results["bronze"].rows) == (1, 1, 0)
    assert set(end.values()) == {0} and as_of is not None
    assert results["silver"].dates == () and results["gold"].dates == ()
    assert results["check_silver"].passed and results["check_gold"].passed
    rule = boundary_for(as_of, settings.batch.lateness_s, settings.batch.period)
    expected = None if speed_streams_it else rule
    assert results["publish"].boundaries == {"orders_by_currency": expected}
    published = read_boundaries(settings.cassandra, ["orders_by_currency"])
    assert (published["orders_by_currency"] and published["orders_by_currency"].at) == expected

    # The next run, still with nothing, is a quiet run of the same range.
    again = run_step(spark, settings, "bronze", CHECKOUTS, "checkouts-empty-2", None)
    assert (again.run, again.skipped) == (1, True)
    assert bronze_state(spark, bronze_path(settings, CHECKOUTS))[2] > as_of
