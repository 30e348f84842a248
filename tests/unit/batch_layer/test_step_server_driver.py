"""A step server whose Spark driver ended says so on /health (503) and stops serving, instead
of taking steps and failing each at once. The driver here is a plain child process: what the
server watches is the process pyspark started, whatever ends it."""

from __future__ import annotations

import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from types import SimpleNamespace

import httpx

from batch_layer.server import StepServer
from batch_layer.server_http import _watch_driver, handler
from core.settings import Settings


def _spark(driver: subprocess.Popen) -> SimpleNamespace:
    context = SimpleNamespace(
        _gateway=SimpleNamespace(proc=driver), applicationId="local-1", master="local[2]"
    )
    return SimpleNamespace(sparkContext=context)


def test_a_server_whose_driver_ended_answers_503_and_stops_serving():
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    server = StepServer(_spark(driver), Settings())
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler(server, Settings()))
    serving = threading.Thread(target=httpd.serve_forever, daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/health"
    token = Settings().monitoring.metrics_token.get_secret_value()
    operator = {"Authorization": f"Bearer {token}"}  # /health's figures take it
    try:
        running = httpx.get(url, headers=operator, timeout=10)
        assert (running.status_code, running.json()["status"]) == (200, "ok")
        assert "driver_exit_code" not in running.json()["spark"]

        driver.kill()
        driver.wait(10)
        ended = httpx.get(url, headers=operator, timeout=10)
        assert (ended.status_code, ended.json()["status"]) == (503, "driver_lost")
        assert ended.json()["spark"]["driver_exit_code"] == -9

        lost = threading.Event()
        watcher = threading.Thread(target=_watch_driver, args=(server, httpd, lost))
        watcher.start()
        watcher.join(10)
        assert lost.is_set() and not watcher.is_alive()
        serving.join(10)
        assert not serving.is_alive(), "the server still serves"
    finally:
        driver.kill()
        httpd.server_close()
