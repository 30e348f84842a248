"""The platform control's lifecycle on a second, isolated platform.

up -> status -> up (no-op) -> down -> up (Kafka and the collector) -> down, with its own state
directory and ports, so it never disturbs the platform the other tests use.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.settings import (
    CassandraSettings,
    CollectorSettings,
    KafkaSettings,
    LocalSettings,
    Settings,
)
from platformctl import platform

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def isolated(settings: Settings, isolated_state: Path):
    state = isolated_state
    isolated = settings.model_copy(
        update={
            "kafka": KafkaSettings(bootstrap_servers="127.0.0.1:19092"),
            "cassandra": CassandraSettings(port=19042),
            "collector": CollectorSettings(port=18088),
            "local": LocalSettings(
                state_dir=state, kafka_controller_port=19093, cassandra_storage_port=17000
            ),
        }
    )
    yield isolated
    platform.down(isolated)


def _our_pids(state: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(state) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


SERVICES = ("kafka", "cassandra", "collector")


def test_up_status_down_up(local_platform, isolated):
    # local_platform: the jars are installed (the isolated state links to them).
    timings = platform.up(isolated, SERVICES, install_missing=False)
    assert set(timings) == {"kafka", "cassandra", "collector"}
    rows = {row.name: row for row in platform.status(isolated) if row.name in SERVICES}
    assert all(row.healthy for row in rows.values()), rows
    assert [rows[n].port for n in ("kafka", "cassandra", "collector")] == [19092, 19042, 18088]
    assert all(row.pid for row in rows.values())
    first_pids = {name: row.pid for name, row in rows.items()}

    # up while running is a no-op: same processes, nothing restarted.
    assert platform.up(isolated, SERVICES, install_missing=False) == dict.fromkeys(rows, 0.0)
    assert {r.name: r.pid for r in platform.status(isolated) if r.name in SERVICES} == first_pids

    assert sorted(platform.down(isolated)) == ["cassandra", "collector", "kafka"]
    assert _our_pids(isolated.local.state_dir) == []  # down leaves nothing of ours running
    assert not any(row.running for row in platform.status(isolated))

    # A stale pid file (a pid that is not ours) does not block the next up. Kafka and the
    # collector only: Cassandra's start after a stop is test_speed_failures' (the shared node,
    # stopped and started mid-stream), and a second Cassandra start here cost a JVM's start-up.
    (isolated.local.state_dir / "run" / "kafka.pid").write_text(f"{os.getpid()}\n")
    again = ("kafka", "collector")
    platform.up(isolated, again, install_missing=False)
    assert all(row.healthy for row in platform.status(isolated) if row.name in again)
    # The topics were provisioned from code on this platform too (the keyspace by the first up).
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(isolated.kafka.client_config()).list_topics(timeout=10).topics
    assert isolated.kafka.events_topic in topics and isolated.kafka.dlq_topic in topics
