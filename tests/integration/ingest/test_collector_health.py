"""/health probes Kafka off the event loop and follows the cluster both ways, without traffic."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from core.settings import KafkaSettings, Settings
from ingest.app import create_app
from tests.integration.asgi import serving
from tests.support.collector import collector_settings
from tests.support.operator import operator
from tests.support.ports import free_port

pytestmark = pytest.mark.integration


class _Forwarder:
    """A TCP port that is closed until :meth:`open`, then forwards to ``target``."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.port = free_port()
        self._target = target
        self._listener: socket.socket | None = None

    def open(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            sink.close()


def _with_bootstrap(settings: Settings, bootstrap: str) -> Settings:
    kafka = KafkaSettings(**(settings.kafka.model_dump() | {"bootstrap_servers": bootstrap}))
    return settings.model_copy(update={"kafka": kafka})


@contextmanager
def _serve(settings: Settings) -> Iterator[str]:
    """The collector app on its port (no topics needed: only /health and /metrics are asked)."""
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=settings.collector.port, log_level="warning"
    )
    with serving(config) as url:
        yield url


def test_health_probes_off_the_event_loop(local_platform, unique_name):
    # Nothing listens at the bootstrap address: each metadata request waits its 2 s out.
    settings = _with_bootstrap(
        collector_settings(local_platform, unique_name, write_keys={"s": "s-write-key-0001"}),
        f"127.0.0.1:{free_port()}",
    )
    with _serve(settings) as url, ThreadPoolExecutor(6) as pool:
        started = time.monotonic()
        ask = {"headers": operator(settings), "timeout": 30}
        checks = [pool.submit(httpx.get, f"{url}/health", **ask) for _ in range(5)]
        time.sleep(0.3)
        metrics_started = time.monotonic()
        metrics = httpx.get(f"{url}/metrics", **ask)
        metrics_took = time.monotonic() - metrics_started
        answers = [c.result() for c in checks]
        health_took = time.monotonic() - started
    assert metrics.status_code == 200
    assert metrics_took < 1.0, f"/metrics waited {metrics_took:.1f}s behind /health"
    assert {a.status_code for a in answers} == {503}
    assert {a.json()["kafka"] for a in answers} == {"down"}
    # Five health checks share one probe in flight (not 5 x 2 s in a row).
    assert health_took < 6.0, f"five /health answers took {health_took:.1f}s"


def test_health_recovers_after_an_outage_without_traffic(local_platform, unique_name):
    host, port = local_platform.kafka.bootstrap_servers.split(",")[0].rsplit(":", 1)
    forwarder = _Forwarder((host, int(port)))
    settings = _with_bootstrap(
        collector_settings(local_platform, unique_name, write_keys={"s": "s-write-key-0001"}),
        f"127.0.0.1:{forwarder.port}",
    )
    try:
        with _serve(settings) as url:
            down = httpx.get(f"{url}/health", timeout=30)
            assert down.status_code == 503, down.text
            forwarder.open()  # Kafka is back; nobody sends an event
            deadline = time.monotonic() + 30
            statuses = []
            while time.monotonic() < deadline:
                statuses.append(httpx.get(f"{url}/health", timeout=30).status_code)
                if statuses[-1] == 200:
                    break
                time.sleep(0.5)
            assert statuses[-1] == 200, statuses
            health = httpx.get(f"{url}/health", headers=operator(settings), timeout=30)
            assert health.json()["kafka"] == "reachable"
    finally:
        forwarder.close()
