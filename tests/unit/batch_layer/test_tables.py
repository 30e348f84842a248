"""The Delta table properties every lake table carries, from settings."""

from __future__ import annotations

from batch_layer.tables import table_properties
from core.settings import BatchSettings, Settings


def test_properties_come_from_the_batch_settings():
    batch = BatchSettings(
        log_retention="interval 90 days",
        deleted_file_retention="interval 2 days",
        checkpoint_interval=25,
    )
    assert table_properties(Settings(batch=batch)) == {
        "delta.logRetentionDuration": "interval 90 days",
        "delta.deletedFileRetentionDuration": "interval 2 days",
        "delta.checkpointInterval": "25",
        "delta.autoOptimize.optimizeWrite": "true",
        "delta.autoOptimize.autoCompact": "true",
    }
