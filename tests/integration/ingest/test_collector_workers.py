"""The collector as its real process (``python -m ingest``) with two workers on one port:
requests reach both, every acknowledged event is in Kafka once, the metrics are the
service's, a worker that dies takes the service down, and SIGTERM under load loses no
acknowledged event."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.settings import Settings
from tests.integration.service_process import started_service
from tests.support.collector import collector_settings, consume_all
from tests.support.operator import operator

pytestmark = [pytest.mark.integration]

WRITE_KEY = "workers-write-key"


@contextmanager
def _collector(
    settings: Settings, log: Path
) -> Iterator[tuple[subprocess.Popen, str, dict[str, Any]]]:
    """``python -m ingest`` with ``settings`` (its topics created, deleted after), once its
    ``/health`` answers 200; yields the process, its URL and that first 200's body."""
    from confluent_kafka.admin import AdminClient

    from ingest.topics import ensure_topics, platform_topics

    admin = AdminClient(settings.kafka.client_config())
    ensure_topics(admin, platform_topics(settings.kafka))
    try:
        with started_service(
            ["ingest"],
            settings,
            settings.collector.port,
            log,
            until=lambda answer: answer.status_code == 200,
            stop_s=90,
            headers=operator(settings),  # the figures: the workers listening
        ) as (proc, url, ready):
            yield proc, url, ready.json()
    finally:
        admin.delete_topics([spec.name for spec in platform_topics(settings.kafka)])


def _settings(local_platform: Settings, name: str) -> Settings:
    return collector_settings(
        local_platform,
        name,
        workers=2,
        write_keys={"workers-site": WRITE_KEY},
        suppressions_wait_s=0,
        delivery_timeout_s=10,
    )


def _batch(prefix: str, n: int) -> bytes:
    calls = [
        {
            "type": "page",
            "messageId": f"{prefix}-{i}",
            "anonymousId": f"user-{i % 7}",
            "properties": {"path": f"/p/{i % 5}"},
            "context": {"page": {"path": f"/p/{i % 5}"}},
        }
        for i in range(n)
    ]
    return orjson.dumps({"batch": calls})


def _post(url: str, body: bytes) -> httpx.Response:
    """One request on a connection of its own (a new source port each time, so the kernel
    spreads them over the workers)."""
    with httpx.Client(base_url=url, auth=(WRITE_KEY, ""), timeout=30) as client:
        return client.post("/v1/batch", content=body, headers={"content-type": "application/json"})


def _samples(url: str, settings: Settings) -> dict[tuple[str, tuple], float]:
    text = httpx.get(f"{url}/metrics", headers=operator(settings)).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _message_ids(settings: Settings, expected: int) -> Counter:
    records = consume_all(settings, settings.kafka.events_topic, expected, timeout_s=60)
    return Counter(orjson.loads(r.value())["event_id"] for r in records)


def test_two_workers_share_the_port_and_answer_for_the_service(
    local_platform, unique_name, tmp_path
):
    settings = _settings(local_platform, unique_name)
    with _collector(settings, tmp_path / "collector.log") as (proc, url, ready):
        # Healthy only once both listen: one answering while the other still started would
        # be given every connection opened then.
        assert ready["status"] == "ok" and ready["workers"] == {"listening": 2, "of": 2}
        answers = [_post(url, _batch(f"r{r}", 10)) for r in range(40)]
        assert [a.status_code for a in answers] == [200] * 40
        assert all(a.json()["accepted"] == 10 for a in answers)

        samples = _samples(url, settings)
        per_worker = {
            dict(labels)["pid"]: value
            for (name, labels), value in samples.items()
            if name == "collector_worker_requests"
        }
        assert len(per_worker) == 2 and all(n > 0 for n in per_worker.values())
        assert sum(per_worker.values()) == 40
        assert proc.pid not in {int(pid) for pid in per_worker}  # the workers, not the parent
        status = (("endpoint", "/v1/batch"), ("status", "200"))
        assert samples[("collector_requests_total", status)] == 40
        pipeline = (("pipeline", "web_events"),)
        assert samples[("collector_events_accepted_total", pipeline)] == 400
        assert samples[("collector_produce_latency_seconds_count", ())] == 40
        assert ("collector_producer_queue_depth", ()) in samples

        health = httpx.get(f"{url}/health", headers=operator(settings)).json()
        assert health["workers"] == {"listening": 2, "of": 2} and health["queue_depth"] >= 0
        assert set(health["suppressions"]) >= {"size", "lag", "loaded"}

        ids = _message_ids(settings, 400)
        assert ids == Counter({f"r{r}-{i}": 1 for r in range(40) for i in range(10)})

        # A worker that dies takes the service down, so its supervisor restarts it whole.
        os.kill(int(next(iter(per_worker))), signal.SIGKILL)
        assert proc.wait(120) != 0
        assert "a collector worker exited with -9" in (tmp_path / "collector.log").read_text()


def test_sigterm_under_load_loses_no_acknowledged_event(local_platform, unique_name, tmp_path):
    settings = _settings(local_platform, unique_name)
    log = tmp_path / "collector.log"
    acknowledged: list[str] = []
    sent: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(n: int) -> None:
        r = 0
        while not stop.is_set():
            prefix = f"c{n}-r{r}"
            r += 1
            with lock:
                sent.extend(f"{prefix}-{i}" for i in range(20))
            try:
                answer = _post(url, _batch(prefix, 20))
            except httpx.HTTPError:  # the service stopped listening
                time.sleep(0.05)
                continue
            if answer.status_code == 200:
                with lock:
                    acknowledged.extend(f"{prefix}-{i}" for i in range(20))

    with _collector(settings, log) as (proc, url, _):
        clients = [threading.Thread(target=client, args=(n,)) for n in range(6)]
        for thread in clients:
            thread.start()
        while len(acknowledged) < 400:  # well under way on both workers
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0
        acknowledged_at_exit = len(acknowledged)
        stop.set()
        for thread in clients:
            thread.join(60)
        ids = _message_ids(settings, len(acknowledged))

    assert len(acknowledged) == acknowledged_at_exit  # nothing answered 200 after the exit
    stopped = [line for line in log.read_text().splitlines() if '"collector.stopped"' in line]
    assert len(stopped) == 2 and all('"undelivered": 0' in line for line in stopped)
    assert all(ids[message_id] == 1 for message_id in acknowledged)
    assert set(ids) <= set(sent)  # nothing in the log that was not sent, none twice
    assert max(ids.values()) == 1
