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


def test_a_table_s_properties_are_checked_from_its_metadata_and_set_where_they_differ(
    spark, tmp_path
):
    """A pipeline run checks the properties of seven tables: reading them must not size the
    tables' files (``DESCRIBE DETAIL``'s three Spark jobs per table)."""
    from batch_layer.tables import current_properties, ensure_properties

    path = str(tmp_path / "table")
    (
        spark.range(3)
        .write.format("delta")
        .option("delta.checkpointInterval", "10")
        .option("delta.logRetentionDuration", "interval 30 days")
        .save(path)
    )
    spark.range(3).write.format("delta").mode("append").save(path)
    context = spark.sparkContext
    context.setJobGroup("unchanged", "properties already as wanted")
    try:
        ensure_properties(spark, {"delta.checkpointInterval": "10"}, path)
        assert context.statusTracker().getJobIdsForGroup("unchanged") == []
        ensure_properties(
            spark,
            {"delta.checkpointInterval": "25", "delta.logRetentionDuration": "interval 30 days"},
            path,
        )
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    properties = current_properties(spark, path)
    assert properties["delta.checkpointInterval"] == "25"
    assert properties["delta.logRetentionDuration"] == "interval 30 days"
