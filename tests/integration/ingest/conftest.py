"""A collector in this process (uvicorn on a free port) writing to per-test topics."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.settings import Settings
from tests.support.collector import (
    RunningCollector,
    collector_settings,
    consume_all,
    serve_collector,
)


@pytest.fixture
def collector(local_platform: Settings, unique_name: str) -> Iterator[RunningCollector]:
    settings = collector_settings(
        local_platform, unique_name, write_keys={"test-site": "test-write-key-0001"}
    )
    with serve_collector(settings, "test-write-key-0001") as running:
        yield running


@pytest.fixture
def consume():
    """``consume(settings, topic, expected)`` -> the records of a topic, from the start."""
    return consume_all
