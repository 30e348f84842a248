"""The image's HEALTHCHECK: the service a container runs, probed where its settings say."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from core.healthcheck import answers, main, target
from core.settings import Settings


class _Service(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        body = f"{self.path} {self.status}".encode()
        self.send_response(self.status)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    _Service.status = 200


@pytest.mark.parametrize(
    ("command", "url"),
    [
        (["python", "-m", "ingest"], "http://127.0.0.1:8088/health"),
        (["/usr/bin/tini", "--", "python", "-m", "ingest", "--instance", "c"], "http://127.0.0.1:8088/health"),
        (["python", "-m", "serving", "serve"], "http://127.0.0.1:8090/health"),
        (["python", "-m", "speed_layer"], "http://127.0.0.1:8096/metrics"),
        (["python", "-m", "ingest", "replay-dead-letters", "--reason", "invalid:"], None),
        (["python", "-m", "serving", "health"], None),
        (["python", "-m", "speed_layer", "--drain"], None),
        (["python", "-m", "speed_layer", "reset", "--from-offsets", "latest"], None),
        (["python", "-m", "batch_layer", "bronze"], None),
        (["sh", "-c", "sleep 1"], None),
    ],
)  # fmt: skip
def test_the_command_names_the_service_to_probe(command, url):
    assert target(command, Settings()) == url


def test_a_service_listening_on_every_address_is_asked_on_loopback(monkeypatch):
    monkeypatch.setenv("WAP_COLLECTOR__HOST", "0.0.0.0")
    monkeypatch.setenv("WAP_COLLECTOR__PORT", "18088")
    assert target(["python", "-m", "ingest"], Settings()) == "http://127.0.0.1:18088/health"


def test_healthy_only_while_the_service_answers_200(service, monkeypatch, capsys):
    monkeypatch.setenv("WAP_SERVING__PORT", str(service.server_address[1]))
    assert main(["python", "-m", "serving", "serve"]) == 0
    assert "/health: 200" in capsys.readouterr().out

    _Service.status = 503
    assert main(["python", "-m", "serving", "serve"]) == 1
    assert "/health: 503 /health 503" in capsys.readouterr().out

    service.shutdown()
    service.server_close()
    healthy, said = answers(f"http://127.0.0.1:{service.server_address[1]}/health", 1.0)
    assert not healthy and "refused" in said


def test_a_one_off_command_has_nothing_to_probe(capsys):
    assert main(["python", "-m", "serving", "timeseries", "page_activity", "/"]) == 0
    assert "nothing to probe" in capsys.readouterr().out
