"""A speed layer of its own per test: topic, keyspace, checkpoints."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.settings import KafkaSettings, LakeSettings, Settings, SpeedSettings


@pytest.fixture
def speed_settings(
    local_platform: Settings, cassandra_keyspace: str, unique_name: str, tmp_path
) -> Iterator[Settings]:
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics
    from speed_layer.job import create_tables

    topic = unique_name.replace("_", "-")
    kafka = KafkaSettings(
        **(
            local_platform.kafka.model_dump()
            | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
        )
    )
    settings = local_platform.model_copy(
        update={
            "kafka": kafka,
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            ),
            "lake": LakeSettings(
                root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "checkpoints")
            ),
            "speed": SpeedSettings(trigger="1 second"),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    create_tables(settings)
    yield settings
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic])


@pytest.fixture
def read_view(cassandra_session):
    """``read_view(settings, view)`` -> {(minute, key): row} from the by-key table."""

    def read(settings: Settings, view: str) -> dict:
        from views import view as view_spec

        spec = view_spec(view)
        rows = cassandra_session.execute(
            f"SELECT * FROM {settings.cassandra.keyspace}.speed_{view}"
        )
        return {(row.window_start, *(getattr(row, k) for k in spec.keys)): row for row in rows}

    return read
