"""Fixtures for the batch layer's pure logic (no Spark, Kafka or Cassandra)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.settings import BatchSettings, KafkaSettings, LakeSettings, Settings


@pytest.fixture
def lake_settings(tmp_path: Path) -> Settings:
    """Settings with an explicit lake root, topic and reports folder: no WAP_* value matters."""
    return Settings(
        lake=LakeSettings(root="s3a://acme-lake/prod/"),
        kafka=KafkaSettings(events_topic="web.events.v1"),
        batch=BatchSettings(reports_dir=tmp_path / "quality"),
    )
