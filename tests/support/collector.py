"""The collector served by uvicorn in the test's process, on per-test topics."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from core.settings import CollectorSettings, KafkaSettings, Settings
from tests.integration.asgi import serving
from tests.support.ports import free_port

__all__ = [
    "RunningCollector",
    "collector_settings",
    "consume_all",
    "own_topics",
    "serve_collector",
]


@dataclass(frozen=True)
class RunningCollector:
    url: str
    settings: Settings
    write_key: str = "test-write-key-0001"


def consume_all(settings: Settings, topic: str, expected: int, timeout_s: float = 30) -> list:
    """Read ``topic`` from the start until ``expected`` records arrived (or time is up)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        settings.kafka.client_config()
        | {
            "group.id": f"reader-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    records = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(records) < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                records.append(message)
        # Anything beyond what we expected would be a duplicate or a stray: look briefly.
        extra_deadline = time.monotonic() + 1.0
        while time.monotonic() < extra_deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append(message)
    finally:
        consumer.close()
    return records


@contextmanager
def serve_collector(settings: Settings, write_key: str) -> Iterator[RunningCollector]:
    """A collector with ``settings`` (topics created, deleted after) served by uvicorn."""
    from confluent_kafka.admin import AdminClient

    from ingest.app import create_app
    from ingest.topics import ensure_topics, platform_topics

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=settings.collector.port, log_level="warning"
    )
    try:
        with serving(config) as url:
            yield RunningCollector(url, settings, write_key)
    finally:
        admin.delete_topics([spec.name for spec in platform_topics(settings.kafka)])


def own_topics(kafka: KafkaSettings, prefix: str) -> KafkaSettings:
    """``kafka`` with the collector's topics of a test's own: ``<prefix>.events``, ``.dlq``
    and ``.suppressions`` (a forget in one test then leaves the next one's users alone)."""
    return kafka.model_copy(
        update={
            "events_topic": f"{prefix}.events",
            "dlq_topic": f"{prefix}.dlq",
            "suppressions_topic": f"{prefix}.suppressions",
        }
    )


def collector_settings(base: Settings, name: str, **collector: object) -> Settings:
    """``base`` with topics named after ``name`` and a collector on a free port."""
    kafka = own_topics(base.kafka, name.replace("_", "-"))
    collector = {"delivery_timeout_s": 5, "retry_after_s": 2, **collector}
    return base.model_copy(
        update={"kafka": kafka, "collector": CollectorSettings(port=free_port(), **collector)}
    )
