"""Which tables maintenance compacts and vacuums."""

from __future__ import annotations

from batch_layer.maintenance import lake_tables
from core.settings import Settings
from views import VIEWS


def test_every_delta_table_of_the_pipeline_and_nothing_else(lake_settings: Settings):
    root = "s3a://acme-lake/prod"
    assert lake_tables(lake_settings) == [
        f"{root}/bronze/web_events_v1",
        f"{root}/silver/web_events_v1",
        f"{root}/silver/web_events_v1_rejects",
        *(f"{root}/gold/{spec.name}" for spec in VIEWS),
    ]
