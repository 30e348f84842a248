"""The published lake: two days of simulated traffic run once through the whole batch pipeline.

Built once per test session (``published_lake``) and only read: by the SQL server's tests
(their servers serve it) and by the rollup test (publish's hour and day rows). A test that
changes a lake builds its own (``pipeline_settings``).
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest

from core.settings import Settings
from tests.support.cassandra import SCHEMA_TIMEOUT_S

__all__ = ["BOT_UA", "GROUP", "PublishedLake", "published_lake"]

BOT_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
"""The crawler's user agent among the lake's events (``events`` of the SQL server leaves it out)."""
GROUP = "published_lake"
"""The ``xdist_group`` of every module reading the lake: one worker builds it once."""


@dataclass(frozen=True)
class PublishedLake:
    """The lake, topics and keyspace of the published traffic, and the events sent into them."""

    settings: Settings
    events: list
    valid: list
    """The events that should be in silver: valid, each ``messageId`` once."""


def _bot_copies(events, count: int = 7):
    """``count`` crawler visits: copies of page views with a campaign, under new ids."""
    pages = [
        e
        for e in events
        if e.defect is None
        and not e.duplicate
        and e.payload.get("type") == "page"
        and e.payload.get("context", {}).get("campaign")
    ]
    bots = []
    for i, event in enumerate(pages[:count]):
        payload = copy.deepcopy(event.payload)
        payload["messageId"] = str(uuid.uuid4())
        payload["anonymousId"] = f"crawler-{i}"
        payload.pop("userId", None)
        payload["context"]["userAgent"] = BOT_UA
        bots.append(replace(event, payload=payload, seq=10_000_000 + i))
    assert len(bots) == count
    return bots


@pytest.fixture(scope="session")
def published_lake(local_platform: Settings, spark, tmp_path_factory) -> Iterator[PublishedLake]:
    """Two days of simulated traffic (duplicates, invalid records, and seven events of a
    crawler) through Kafka and the real batch pipeline (bronze -> silver -> gold -> publish,
    with both gates) into a lake, topics and a keyspace of their own; never written by a test."""
    from confluent_kafka.admin import AdminClient

    from batch_layer.runner import run_step
    from batch_layer.steps import THROUGH_PUBLISH
    from core.cassandra import connect, ensure_keyspace
    from core.settings import BatchSettings, KafkaSettings, LakeSettings
    from core.spark import local_spark_jars
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from ingest.topics import ensure_topics, platform_topics
    from layout import create_statements
    from tests.support.web import WEB_EVENTS

    root = tmp_path_factory.mktemp("published_lake")
    keyspace = f"t_published_{uuid.uuid4().hex[:8]}"
    topic = keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **local_platform.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq"}
        | {"suppressions_topic": f"{topic}.suppressions", "partitions": 2}
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    ttl_s = 10 * 365 * 24 * 3600  # the traffic is from 2024: speed rows must not expire
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "cassandra": local_platform.cassandra.model_copy(update={"keyspace": keyspace}),
            "speed": local_platform.speed.model_copy(update={"ttl_s": ttl_s}),
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "cp")),
            "batch": BatchSettings(reports_dir=root / "quality", lateness_s=60),
            "spark": local_platform.spark.model_copy(
                update={"jars": local_spark_jars(local_platform.local.state_dir)}
            ),
        }
    )
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(session, keyspace, {"class": "SimpleStrategy", "replication_factor": 1})
    for statement in create_statements(keyspace, ttl_s):
        session.execute(statement)
    events = generate(
        SimulatorConfig(
            seed=31,
            events=3000,
            rate=0.03,  # two days: cohorts for the retention query, rollups across midnight
            start=datetime(2024, 3, 4, 6, 0, tzinfo=UTC),
            duplicate_rate=0.03,
            invalid_rate=0.02,
        )
    )
    events += _bot_copies(events)
    produce_direct(events, settings)
    runs = {
        step: run_step(spark, settings, step, WEB_EVENTS, "published-1", None)
        for step in THROUGH_PUBLISH
    }
    assert len(runs["publish"].days) >= 2, runs["publish"]
    seen, valid = set(), []
    for event in events:
        if event.defect is None and event.message_id not in seen:
            seen.add(event.message_id)
            valid.append(event)
    yield PublishedLake(settings, events, valid)
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])
    session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=SCHEMA_TIMEOUT_S)
    cluster.shutdown()
