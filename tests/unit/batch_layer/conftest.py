"""Fixtures for the batch layer's pure logic (no Spark, Kafka or Cassandra)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from core.settings import BatchSettings, KafkaSettings, LakeSettings, Settings
from views import ViewSpec


@pytest.fixture
def lake_settings(tmp_path: Path) -> Settings:
    """Settings with an explicit lake root, topic and reports folder: no WAP_* value matters."""
    return Settings(
        lake=LakeSettings(root="s3a://acme-lake/prod/"),
        kafka=KafkaSettings(events_topic="web.events.v1"),
        batch=BatchSettings(reports_dir=tmp_path / "quality"),
    )


@pytest.fixture
def declare_views(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """``declare_views(*specs)``: pipelines resolve these views by name too, for one test.

    They join ``views.registry.view`` only, not ``VIEWS``: like the views of a
    pipeline over another topic, which serving and the speed layer do not list.
    """
    import views.registry

    registered = views.registry.view

    def declare(*specs: ViewSpec) -> None:
        declared = {spec.name: spec for spec in specs}
        monkeypatch.setattr(
            views.registry, "view", lambda name: declared.get(name) or registered(name)
        )

    return declare
