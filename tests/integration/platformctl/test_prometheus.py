"""Prometheus on a second, isolated platform: every target scraped, and a stopped speed job
seen by its alert.

The collector, the speed job, serving, the batch step server and Prometheus come up
through ``platformctl`` with their own state and ports, on the run's Kafka and Cassandra
(topics and a keyspace of their own: neither is a scrape target); a little live traffic
goes through the speed layer. Every scrape target
must answer (``up == 1``); then the speed job is stopped and ``SpeedLayerStale``
must fire (read from Prometheus' alerts API) within its threshold, its ``for:``
and a few evaluation intervals.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from core.settings import (
    BatchSettings,
    CollectorSettings,
    LakeSettings,
    MonitoringSettings,
    ServingSettings,
    Settings,
    SpeedSettings,
)
from platformctl import platform
from tests.support.cassandra import SCHEMA_TIMEOUT_S
from tests.support.collector import own_topics
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICES = ("collector", "speed", "serving", "batch", "prometheus")
FRESHNESS_S, FOR = 30, "10s"


@pytest.fixture
def watched(local_platform: Settings, isolated_state: Path, tmp_path: Path, unique_name: str):
    from confluent_kafka.admin import AdminClient

    from core.cassandra import connect, ensure_keyspace
    from ingest.topics import ensure_topics, platform_topics
    from layout import create_tables

    topic = unique_name.replace("_", "-")
    kafka = own_topics(local_platform.kafka, topic)
    watched = local_platform.model_copy(
        update={
            "kafka": kafka,
            "cassandra": local_platform.cassandra.model_copy(update={"keyspace": unique_name}),
            "collector": CollectorSettings(port=free_port()),
            "speed": SpeedSettings(metrics_port=free_port(), pipelines=["web_events"]),
            "serving": ServingSettings(port=free_port(), workers=1, pointer_cache_s=0.5),
            "batch": BatchSettings(step_server_port=free_port(), reports_dir=tmp_path / "quality"),
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "monitoring": MonitoringSettings(
                prometheus_port=free_port(),
                scrape_interval_s=2,
                freshness_alert_s=FRESHNESS_S,
                freshness_alert_for=FOR,
            ),
            "local": local_platform.local.model_copy(update={"state_dir": isolated_state}),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    cluster, session = connect(watched.cassandra)
    ensure_keyspace(session, unique_name, {"class": "SimpleStrategy", "replication_factor": 1})
    create_tables(watched)
    yield watched
    platform.down(watched, SERVICES)
    session.execute(f"DROP KEYSPACE IF EXISTS {unique_name}", timeout=SCHEMA_TIMEOUT_S)
    cluster.shutdown()
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])


def _prometheus(settings: Settings, path: str, **params: str) -> dict:
    port = settings.monitoring.prometheus_port
    answer = httpx.get(f"http://127.0.0.1:{port}{path}", params=params, timeout=10)
    answer.raise_for_status()
    return answer.json()["data"]


def _wait(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(1)
    raise AssertionError(f"{what} not within {timeout_s}s")


def test_every_target_is_scraped_and_a_stopped_speed_job_fires_its_alert(watched):
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct

    platform.up(watched, SERVICES, install_missing=False)
    produce_direct(
        generate(SimulatorConfig(seed=5, events=300, rate=100.0, start=datetime.now(UTC))),
        watched,
    )

    def all_up():
        samples = _prometheus(watched, "/api/v1/query", query="up")["result"]
        jobs = {s["metric"]["job"]: s["value"][1] for s in samples}
        want = {"prometheus", "collector", "serving", "speed", "batch"}
        return jobs if set(jobs) == want and set(jobs.values()) == {"1"} else None

    _wait(all_up, 120, "every target up == 1")

    def fresh():
        query = f"wap_speed_freshness_seconds < {FRESHNESS_S}"
        return _prometheus(watched, "/api/v1/query", query=query)["result"]

    _wait(fresh, 180, "the speed layer's freshness below the threshold (the traffic seen)")
    alerts = _prometheus(watched, "/api/v1/alerts")["alerts"]
    assert not [a for a in alerts if a["labels"]["alertname"] == "SpeedLayerStale"]

    assert platform.down(watched, ("speed",)) == ["speed"]

    views = {"page_activity", "site_activity", "search_terms", "clicks"}

    def stale_firing():
        alerts = _prometheus(watched, "/api/v1/alerts")["alerts"]
        firing = {
            a["labels"]["view"]
            for a in alerts
            if a["labels"]["alertname"] == "SpeedLayerStale" and a["state"] == "firing"
        }
        # Each view's series crosses the threshold at its own evaluation: wait for all.
        assert firing <= views, firing
        return firing == views

    # Threshold (from the last heartbeat, <= 10 s before the stop) + for + evaluation slack.
    _wait(stale_firing, FRESHNESS_S + 10 + 60, "SpeedLayerStale firing for every view")
    # The speed target itself is gone: TargetDown pends or fires for it, not for the others.
    down = _prometheus(watched, "/api/v1/query", query="up == 0")["result"]
    assert {s["metric"]["job"] for s in down} == {"speed"}
