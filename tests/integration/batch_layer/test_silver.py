"""Silver on real Kafka -> bronze -> Delta: exact dedupe, rejects, day-by-day rewrites."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from batch_layer.bronze import ingest_bronze
from batch_layer.pipelines import WEB_EVENTS
from batch_layer.silver import build_silver
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_silver_holds_each_valid_event_once_in_its_true_day(spark, lake_settings):
    # About a day and a half of traffic, with duplicates and late events.
    config = SimulatorConfig(
        seed=8, events=1200, rate=0.01, duplicate_rate=0.1, late_rate=0.05, skewed_client_rate=0.2
    )
    events = generate(config)
    truth = build_truth(events)
    produce_direct(events, lake_settings)
    producer = Producer(lake_settings.kafka.client_config())
    producer.produce(lake_settings.kafka.events_topic, value=b"{not json")
    producer.flush(10)
    ingest_bronze(spark, lake_settings, WEB_EVENTS)

    run = build_silver(spark, lake_settings, spec=WEB_EVENTS)
    assert len(run.dates) >= 2
    silver = spark.read.format("delta").load(run.path)
    assert silver.count() == truth.valid_events == run.events
    assert silver.select("event_id").distinct().count() == truth.valid_events
    assert run.duplicates == sum(1 for e in events if e.duplicate and not e.defect)
    assert run.rejects == 1
    by_id = {e.message_id: e.time for e in events if not e.defect}
    for row in silver.select("event_id", "event_date").collect():
        assert row.event_date == by_id[row.event_id].date()

    # Reprocessing one day rewrites that day only, with the same rows.
    day = run.dates[0]
    others_before = silver.where(silver.event_date != day).count()
    again = build_silver(spark, lake_settings, [day], spec=WEB_EVENTS)
    assert again.dates == (day,)
    silver = spark.read.format("delta").load(run.path)
    assert silver.count() == truth.valid_events
    assert silver.where(silver.event_date != day).count() == others_before
    history = spark.sql(f"DESCRIBE HISTORY delta.`{run.path}`").collect()
    assert f"DATE'{day.isoformat()}'" in str(history[0].operationParameters)


def test_equal_ids_from_two_sources_are_two_events(spark, lake_settings):
    """A messageId is unique within its source: another site's equal id is another event."""
    from batch_layer.quality import check_silver

    events = generate(SimulatorConfig(seed=18, events=300, duplicate_rate=0.1))
    truth = build_truth(events)
    produce_direct(events, lake_settings, source_id="site-a")
    produce_direct(events, lake_settings, source_id="site-b")
    ingest_bronze(spark, lake_settings, WEB_EVENTS)

    run = build_silver(spark, lake_settings, spec=WEB_EVENTS)
    silver = spark.read.format("delta").load(run.path)
    per_source = {r.source_id: r["count"] for r in silver.groupBy("source_id").count().collect()}
    assert per_source == {"site-a": truth.valid_events, "site-b": truth.valid_events}
    assert run.duplicates == 2 * sum(1 for e in events if e.duplicate and not e.defect)
    report = check_silver(spark, lake_settings, WEB_EVENTS, run_id="two-sources")
    assert report.passed, report


def test_silver_keeps_the_whole_event_for_sql(spark, lake_settings):
    """Custom properties and context the contract does not type are queryable from silver."""
    from datetime import UTC, datetime

    from batch_layer.silver import silver_path
    from ingest.simulator.direct import produce_payloads

    now = datetime.now(UTC)
    order = {
        "type": "track",
        "event": "Order Completed",
        "messageId": "order-1",
        "anonymousId": "a-1",
        "timestamp": now.isoformat(),
        "properties": {
            "revenue": 42.5,
            "currency": "EUR",
            "products": [{"sku": "boots", "quantity": 2}, {"sku": "socks", "quantity": 3}],
        },
        "context": {
            "userAgent": "Mozilla/5.0 (iPhone)",
            "locale": "de-DE",
            "timezone": "Europe/Berlin",
            "device": {"type": "mobile"},
            "campaign": {"name": "winter", "source": "newsletter"},
            "shop": {"tier": "gold"},
        },
        "integrations": {"All": False},
    }
    assert produce_payloads([(order, now)], lake_settings, "shop") == {
        "accepted": 1,
        "dead_lettered": 0,
    }
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    build_silver(spark, lake_settings, spec=WEB_EVENTS)

    spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS)).createOrReplaceTempView(
        "silver_events"
    )
    row = spark.sql(
        """
        SELECT payload:properties.revenue::double AS revenue,
               payload:properties.currency::string AS currency,
               payload:properties.products[1].sku::string AS second_sku,
               variant_get(payload, '$.context.userAgent', 'string') AS user_agent,
               payload:context.device.type::string AS device,
               payload:context.campaign.name::string AS campaign,
               payload:context.shop.tier::string AS custom,
               payload:integrations.All::boolean AS to_all
        FROM silver_events WHERE event_id = 'order-1' AND source_id = 'shop'
        """
    ).collect()
    assert [r.asDict() for r in row] == [
        {
            "revenue": 42.5,
            "currency": "EUR",
            "second_sku": "socks",
            "user_agent": "Mozilla/5.0 (iPhone)",
            "device": "mobile",
            "campaign": "winter",
            "custom": "gold",
            "to_all": False,
        }
    ]
    from batch_layer.quality import check_silver

    assert check_silver(spark, lake_settings, WEB_EVENTS, run_id="whole-events").passed
