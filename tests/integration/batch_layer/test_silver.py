"""Silver on real Kafka -> bronze -> Delta: exact dedupe, rejects, day-by-day rewrites."""

from __future__ import annotations

import pytest
import yaml
from confluent_kafka import Producer
from open_data_contract_standard.model import OpenDataContractStandard

from batch_layer.bronze import ingest_bronze
from batch_layer.silver import build_silver
from data_contracts import Contract
from data_contracts.compat import published_shapes, shape_of
from data_contracts.contract import CONTRACTS_DIR
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS

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


def _readers_of_1_0() -> Contract:
    """The contract as readers had it before 1.1.0: the published 1.0.0 shape."""
    document = yaml.safe_load((CONTRACTS_DIR / "web_events" / "v1.odcs.yaml").read_text())
    document["version"] = "1.0.0"
    props = next(p for p in document["schema"][0]["properties"] if p["name"] == "properties")
    props["properties"] = [p for p in props["properties"] if p["name"] != "engaged_ms"]
    contract = Contract("web_events", OpenDataContractStandard.model_validate(document))
    assert shape_of(contract) == published_shapes(contract)["1.0.0"]
    return contract


def test_engaged_time_of_1_1_becomes_a_typed_silver_column(spark, lake_settings, monkeypatch):
    """``properties.engaged_ms`` (contract 1.1) in silver, across the readers' upgrade.

    Silver built by readers still on 1.0 has no such column; the first run on 1.1 adds it
    (the days built before hold it null), the 1.1 quality gate passes, and rebuilding a
    day from bronze types the values its raw records always held. Gold does not change.
    """
    from datetime import UTC, datetime, timedelta

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    import batch_layer.silver as silver_module
    from batch_layer.gold import build_gold, gold_path
    from batch_layer.quality import check_silver
    from batch_layer.silver import silver_path
    from ingest.simulator.direct import produce_payloads
    from views import view

    now = datetime.now(UTC)
    early, late = now - timedelta(days=2), now - timedelta(hours=1)

    def page(n: int, at: datetime, engaged_ms: float | None = None) -> tuple[dict, datetime]:
        properties = {"path": "/pricing"} | (
            {"engaged_ms": engaged_ms} if engaged_ms is not None else {}
        )
        call = {"type": "page", "messageId": f"p{n}", "anonymousId": f"a{n}"}
        return call | {"timestamp": at.isoformat(), "properties": properties}, at

    def engaged_by_event() -> dict[str, tuple[float | None, float | None]]:
        """Event id -> (silver's typed column, the value in its payload)."""
        rows = (
            spark.read.format("delta")
            .load(silver_path(lake_settings, WEB_EVENTS))
            .select(
                "event_id",
                F.col("properties.engaged_ms").alias("column"),
                F.expr("payload:properties.engaged_ms::double").alias("payload"),
            )
        )
        return {r.event_id: (r.column, r.payload) for r in rows.collect()}

    produce_payloads([page(1, early, 1500.0), page(2, early)], lake_settings, "site")
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    with monkeypatch.context() as readers_on_1_0:
        readers_on_1_0.setattr(silver_module, "load_contract", lambda *_: _readers_of_1_0())
        build_silver(spark, lake_settings, spec=WEB_EVENTS)
    silver = spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS))
    assert "engaged_ms" not in silver.schema["properties"].dataType.fieldNames()

    # Readers on 1.1; events of another day arrive.
    produce_payloads([page(3, late, 2500.5), page(4, late)], lake_settings, "site")
    ingest_bronze(spark, lake_settings, WEB_EVENTS)
    assert build_silver(spark, lake_settings, spec=WEB_EVENTS).dates == (late.date(),)
    silver = spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS))
    assert silver.schema["properties"].dataType["engaged_ms"].dataType == T.DoubleType()
    assert engaged_by_event() == {
        "p1": (None, 1500.0),  # its day was built by 1.0 readers: only the payload has it
        "p2": (None, None),
        "p3": (2500.5, 2500.5),
        "p4": (None, None),
    }
    assert check_silver(spark, lake_settings, WEB_EVENTS, run_id="engaged-1-1").passed

    # Rebuilding the earlier day from bronze (a backfill) types what its records hold.
    build_silver(spark, lake_settings, [early.date()], spec=WEB_EVENTS)
    assert engaged_by_event()["p1"] == (1500.0, 1500.0)

    # A view-style aggregation over silver reads the column; the views' gold is unchanged.
    silver = spark.read.format("delta").load(silver_path(lake_settings, WEB_EVENTS))
    engaged = F.col("properties.engaged_ms")
    per_page = (
        silver.where(F.col("type") == "page")
        .groupBy(F.col("properties.path").alias("path"))
        .agg(F.count(engaged).alias("n"), F.sum(engaged).alias("total"))
    )
    assert [tuple(r) for r in per_page.collect()] == [("/pricing", 2, 4000.5)]
    build_gold(spark, lake_settings, [early.date(), late.date()], spec=WEB_EVENTS)
    spec = view("page_activity")
    gold = spark.read.format("delta").load(gold_path(lake_settings, spec))
    assert not [c for c in gold.columns if "engaged" in c]
    assert set(spec.columns) <= set(gold.columns)
    assert gold.agg(F.sum("page_views")).first()[0] == 4


def test_a_rerun_after_a_failure_past_the_writes_repeats_nothing(spark, lake_settings, monkeypatch):
    """Silver appended its rows, rejects and index, then failed before its ledger entry: the
    rerun takes the same records again, finds its own rows (not copies of them), writes
    nothing twice, and the gate reconciles it."""
    from batch_layer import silver as silver_module
    from batch_layer.ledger import Ledger
    from batch_layer.quality import check_silver

    events = generate(SimulatorConfig(seed=12, events=400, duplicate_rate=0.1))
    truth = build_truth(events)
    produce_direct(events, lake_settings)
    producer = Producer(lake_settings.kafka.client_config())
    producer.produce(lake_settings.kafka.events_topic, value=b"{not json")
    producer.flush(10)
    ingest_bronze(spark, lake_settings, WEB_EVENTS)

    def crash(self, entry):
        raise RuntimeError("the driver died before the ledger entry")

    with monkeypatch.context() as patch:
        patch.setattr(Ledger, "append", crash)
        with pytest.raises(RuntimeError, match="driver died"):
            build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="attempt-1")
    run = build_silver(spark, lake_settings, spec=WEB_EVENTS, run_id="attempt-2")
    assert run.duplicates == sum(1 for e in events if e.duplicate and not e.defect)
    silver = spark.read.format("delta").load(run.path)
    assert silver.count() == truth.valid_events
    rejects = spark.read.format("delta").load(silver_module.rejects_path(lake_settings, WEB_EVENTS))
    assert rejects.count() == 1
    report = check_silver(spark, lake_settings, WEB_EVENTS, run_id="attempt-2")
    assert report.passed, report.failures()
