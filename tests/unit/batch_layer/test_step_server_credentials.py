"""The step server's credentials: ``/steps`` only with its token (never an empty one),
``/metrics`` only with the operators' metrics token, ``/health``'s figures only with it too
(a probe without it gets the status). The Spark driver here is a plain child process."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from types import SimpleNamespace

import httpx
import pytest
from pydantic import SecretStr

from batch_layer.server import StepServer
from batch_layer.server_http import handler
from core.settings import Settings

METRICS = "metrics-token-of-this-test"


def _serve(settings: Settings) -> Iterator[str]:
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    context = SimpleNamespace(
        _gateway=SimpleNamespace(proc=driver), applicationId="local-1", master="local[2]"
    )
    server = StepServer(SimpleNamespace(sparkContext=context), settings)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(server, settings))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        driver.kill()
        driver.wait(10)


@pytest.fixture
def step_server() -> Iterator[str]:
    base = Settings()
    monitoring = base.monitoring.model_copy(update={"metrics_token": SecretStr(METRICS)})
    yield from _serve(base.model_copy(update={"monitoring": monitoring}))


@pytest.fixture
def emptied_token_server() -> Iterator[str]:
    """A server whose settings hold an empty step token (built past the settings' check,
    which refuses one): the comparison itself must still refuse an empty bearer."""
    base = Settings()
    batch = base.batch.model_copy(update={"step_server_token": SecretStr("")})
    yield from _serve(base.model_copy(update={"batch": batch}))


def _send(url: str, method: str, path: str, authorization: str) -> tuple[int, dict]:
    """One request with this ``Authorization`` value as it is (httpx refuses trailing
    spaces in a header)."""
    connection = http.client.HTTPConnection(url.removeprefix("http://"), timeout=10)
    body = json.dumps({"args": ["bronze", "--pipeline", "web_events", "--run-id", "r"]})
    try:
        connection.putrequest(method, path)
        connection.putheader("Authorization", authorization)
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body.encode())
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read() or b"{}")
    finally:
        connection.close()


@pytest.mark.parametrize("header", ["Bearer ", "Bearer    ", "bearer", "Bearer", " Bearer  "])
def test_an_empty_bearer_is_refused_even_when_the_token_is_empty(emptied_token_server, header):
    url = emptied_token_server
    status, body = _send(url, "POST", "/steps", header)
    assert status == 401, body
    assert "WAP_BATCH__STEP_SERVER_TOKEN" in body["message"]
    assert _send(url, "GET", "/steps/any", header)[0] == 401
    assert _send(url, "DELETE", "/steps/any", header)[0] == 401


def test_metrics_take_the_metrics_token(step_server):
    anonymous = httpx.get(f"{step_server}/metrics")
    assert anonymous.status_code == 401
    assert "WAP_MONITORING__METRICS_TOKEN" in anonymous.json()["message"]
    step_token = Settings().batch.step_server_token.get_secret_value()
    for wrong in ("Bearer", "Bearer guess", f"Bearer {step_token}", f"Basic {METRICS}"):
        assert (
            httpx.get(f"{step_server}/metrics", headers={"Authorization": wrong}).status_code == 401
        )
    scraped = httpx.get(f"{step_server}/metrics", headers={"Authorization": f"Bearer {METRICS}"})
    assert scraped.status_code == 200 and "process_" in scraped.text


def test_health_shows_a_probe_its_status_and_an_operator_its_figures(step_server):
    probe = httpx.get(f"{step_server}/health")
    assert (probe.status_code, probe.json()) == (200, {"status": "ok"})
    guessed = httpx.get(f"{step_server}/health", headers={"Authorization": "Bearer guess"})
    assert guessed.json() == {"status": "ok"}
    operator = httpx.get(f"{step_server}/health", headers={"Authorization": f"Bearer {METRICS}"})
    assert operator.status_code == 200
    assert operator.json()["spark"]["application_id"] == "local-1"
    assert {"running", "finished", "last", "uptime_s"} <= set(operator.json())
