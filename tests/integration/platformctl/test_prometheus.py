"""Prometheus on a second, isolated platform: every target scraped, and a stopped speed job
seen by its alert.

Kafka, Cassandra, the collector, the speed job, serving, the batch step server
and Prometheus come up through ``platformctl`` with their own state and
ports; a little live traffic goes through the speed layer. Every scrape target
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
    CassandraSettings,
    CollectorSettings,
    KafkaSettings,
    LakeSettings,
    LocalSettings,
    MonitoringSettings,
    ServingSettings,
    Settings,
    SpeedSettings,
)
from platformctl import platform

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SERVICES = ("kafka", "cassandra", "collector", "speed", "serving", "batch", "prometheus")
FRESHNESS_S, FOR = 30, "10s"


@pytest.fixture
def watched(settings: Settings, isolated_state: Path, tmp_path: Path):
    state = isolated_state
    watched = settings.model_copy(
        update={
            "kafka": KafkaSettings(bootstrap_servers="127.0.0.1:29092"),
            "cassandra": CassandraSettings(port=29042),
            "collector": CollectorSettings(port=28088),
            "speed": SpeedSettings(metrics_port=28096, pipelines=["web_events"]),
            "serving": ServingSettings(port=28090, workers=1, pointer_cache_s=0.5),
            "batch": BatchSettings(step_server_port=28095, reports_dir=tmp_path / "quality"),
            "lake": LakeSettings(root=str(tmp_path / "lake"), checkpoint_root=str(tmp_path / "cp")),
            "monitoring": MonitoringSettings(
                prometheus_port=29090,
                scrape_interval_s=2,
                freshness_alert_s=FRESHNESS_S,
                freshness_alert_for=FOR,
            ),
            "local": LocalSettings(
                state_dir=state, kafka_controller_port=29093, cassandra_storage_port=27000
            ),
        }
    )
    yield watched
    platform.down(watched)


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


def test_every_target_is_scraped_and_a_stopped_speed_job_fires_its_alert(local_platform, watched):
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
    stopped = time.monotonic()

    def stale_firing():
        alerts = _prometheus(watched, "/api/v1/alerts")["alerts"]
        return [
            a
            for a in alerts
            if a["labels"]["alertname"] == "SpeedLayerStale" and a["state"] == "firing"
        ]

    # Threshold (from the last heartbeat, <= 10 s before the stop) + for + evaluation slack.
    firing = _wait(stale_firing, FRESHNESS_S + 10 + 60, "SpeedLayerStale firing")
    took = time.monotonic() - stopped
    assert {a["labels"]["view"] for a in firing} == {
        "page_activity",
        "site_activity",
        "search_terms",
        "clicks",
    }
    assert took <= FRESHNESS_S + 10 + 60
    # The speed target itself is gone: TargetDown pends or fires for it, not for the others.
    down = _prometheus(watched, "/api/v1/query", query="up == 0")["result"]
    assert {s["metric"]["job"] for s in down} == {"speed"}
