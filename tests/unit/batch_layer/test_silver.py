"""Silver's pure parts: the partition predicate and where its tables live."""

from __future__ import annotations

import doctest
from datetime import date

import batch_layer.silver
from batch_layer.bronze import bronze_path
from batch_layer.pipelines import WEB_EVENTS, PipelineSpec
from batch_layer.silver import days_predicate, rejects_path, silver_path
from core.settings import KafkaSettings, LakeSettings, Settings


def test_one_day():
    assert days_predicate("event_date", [date(2024, 2, 29)]) == "event_date IN (DATE'2024-02-29')"


def test_several_days_keep_their_order_and_column():
    days = (date(2024, 1, 1), date(2024, 1, 2), date(2023, 12, 31))
    assert days_predicate("window_date", days) == (
        "window_date IN (DATE'2024-01-01', DATE'2024-01-02', DATE'2023-12-31')"
    )


def test_paths_per_topic(lake_settings: Settings):
    assert bronze_path(lake_settings) == "s3a://acme-lake/prod/bronze/web_events_v1"
    assert silver_path(lake_settings) == "s3a://acme-lake/prod/silver/web_events_v1"
    assert rejects_path(lake_settings) == "s3a://acme-lake/prod/silver/web_events_v1_rejects"
    orders = PipelineSpec("orders", "orders", 2, WEB_EVENTS.views[:1], topic="shop-orders.v2")
    assert silver_path(lake_settings, orders) == "s3a://acme-lake/prod/silver/shop_orders_v2"


def test_a_lake_root_with_bronze_in_its_path_keeps_silver_under_that_root():
    lake = LakeSettings(root="/mnt/bronze/lake")
    settings = Settings(lake=lake, kafka=KafkaSettings(events_topic="web.events.v1"))
    assert bronze_path(settings) == "/mnt/bronze/lake/bronze/web_events_v1"
    assert silver_path(settings) == "/mnt/bronze/lake/silver/web_events_v1"


def test_docstring_examples():
    failed, attempted = doctest.testmod(batch_layer.silver)
    assert attempted > 0 and failed == 0
