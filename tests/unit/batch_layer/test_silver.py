"""Silver's pure parts: the partition predicate, where its tables live, how bronze parses."""

from __future__ import annotations

import json
from datetime import date, timedelta

from batch_layer.bronze import bronze_path
from batch_layer.silver import days_predicate, parse_bronze, rejects_path, silver_path
from core.frames import local_frame
from core.settings import KafkaSettings, LakeSettings, Settings
from pipelines import PipelineSpec
from tests.support.web import WEB_EVENTS


def test_one_day():
    assert days_predicate("event_date", [date(2024, 2, 29)]) == "event_date IN (DATE'2024-02-29')"


def test_several_days_keep_their_order_and_column():
    days = (date(2024, 1, 1), date(2024, 1, 2), date(2023, 12, 31))
    assert days_predicate("window_date", days) == (
        "window_date IN (DATE'2024-01-01', DATE'2024-01-02', DATE'2023-12-31')"
    )


def test_paths_per_topic(lake_settings: Settings):
    assert bronze_path(lake_settings, WEB_EVENTS) == "s3a://acme-lake/prod/bronze/web_events_v1"
    assert silver_path(lake_settings, WEB_EVENTS) == "s3a://acme-lake/prod/silver/web_events_v1"
    rejects = rejects_path(lake_settings, WEB_EVENTS)
    assert rejects == "s3a://acme-lake/prod/silver/web_events_v1_rejects"
    orders = PipelineSpec("orders", "orders", 2, WEB_EVENTS.views[:1], topic="shop-orders.v2")
    assert silver_path(lake_settings, orders) == "s3a://acme-lake/prod/silver/shop_orders_v2"


def test_a_lake_root_with_bronze_in_its_path_keeps_silver_under_that_root():
    lake = LakeSettings(root="/mnt/bronze/lake")
    settings = Settings(lake=lake, kafka=KafkaSettings(events_topic="web.events.v1"))
    assert bronze_path(settings, WEB_EVENTS) == "/mnt/bronze/lake/bronze/web_events_v1"
    assert silver_path(settings, WEB_EVENTS) == "/mnt/bronze/lake/silver/web_events_v1"


def _bronze(spark, *events: dict):
    """Bronze rows (partition 0, offsets 0..) holding ``events`` as JSON values."""
    rows = [(0, offset, json.dumps(e).encode()) for offset, e in enumerate(events)]
    return local_frame(spark, rows, "partition INT, offset LONG, value BINARY")


def _event(event_id: str, timestamp: str, received_at: str = "2026-01-01T12:00:00Z") -> dict:
    return {
        "event_id": event_id,
        "type": "page",
        "anonymousId": "a-1",
        "timestamp": timestamp,
        "receivedAt": received_at,
    }


def test_an_event_time_beyond_the_future_tolerance_is_rejected_not_partitioned(spark):
    bronze = _bronze(
        spark,
        _event("on-time", "2026-01-01T11:59:00Z"),
        _event("at-tolerance", "2026-01-01T12:01:00Z"),
        _event("just-beyond", "2026-01-01T12:01:00.001Z"),
        _event("year-9999", "9999-12-31T23:59:59Z"),
    )
    events, rejects = parse_bronze(bronze, WEB_EVENTS, future_tolerance=timedelta(seconds=60))
    kept = {r.event_id: r.event_date for r in events.select("event_id", "event_date").collect()}
    assert kept == {"on-time": date(2026, 1, 1), "at-tolerance": date(2026, 1, 1)}
    refused = {r.offset: r.reason for r in rejects.collect()}
    assert refused == {2: "invalid:timestamp_future", 3: "invalid:timestamp_future"}
    assert events.count() + rejects.count() == bronze.count()


def test_the_future_tolerance_is_a_parameter(spark):
    bronze = _bronze(spark, _event("ahead", "2026-01-01T12:05:00Z"))
    events, _ = parse_bronze(bronze, WEB_EVENTS, future_tolerance=timedelta(minutes=5))
    assert [r.event_id for r in events.collect()] == ["ahead"]
    _, rejects = parse_bronze(bronze, WEB_EVENTS)  # the default settings' 60 s
    assert [r.reason for r in rejects.collect()] == ["invalid:timestamp_future"]
