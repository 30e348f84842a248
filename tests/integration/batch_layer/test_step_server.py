"""The batch step server runs steps sent over HTTP in its one SparkSession, as DAG tasks do."""

from __future__ import annotations

import time

import httpx
import pytest

from batch_layer.pipelines import WEB_EVENTS
from core.settings import Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def _url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.batch.step_server_port}"


def _submit(settings: Settings, *args: str) -> httpx.Response:
    run = ["--pipeline", WEB_EVENTS.name, "--run-id", "server-test"]
    return httpx.post(f"{_url(settings)}/steps", json={"args": [*args, *run]}, timeout=30)


def _wait(settings: Settings, request: str) -> dict:
    lines: list[str] = []
    since = 0
    while True:
        run = httpx.get(f"{_url(settings)}/steps/{request}", params={"since": since}).json()
        lines += run["log"]
        since = run["next"]
        if run["state"] != "running":
            return run | {"log": lines}
        time.sleep(0.5)


def test_steps_run_on_the_server_with_their_logs_and_exit_codes(step_server):
    settings = step_server
    events = generate(SimulatorConfig(seed=41, events=300, duplicate_rate=0.05))
    truth = build_truth(events)
    accepted = produce_direct(events, settings)["accepted"]

    first = _submit(settings, "bronze")
    assert first.status_code == 202
    busy = _submit(settings, "silver")  # the same pipeline while bronze runs
    assert busy.status_code == 409 and "one at a time" in busy.json()["message"]
    bronze = _wait(settings, first.json()["id"])
    assert bronze["state"] == "success" and bronze["exit_code"] == 0
    assert bronze["summary"]["steps"]["bronze"]["result"]["rows"] == accepted
    assert any('"batch.step_done"' in line for line in bronze["log"])

    silver = _wait(settings, _submit(settings, "silver").json()["id"])
    assert silver["summary"]["steps"]["silver"]["result"]["events"] == truth.valid_events
    # Gold before the silver gate: the step fails, its traceback comes back, exit code 1.
    gold = _wait(settings, _submit(settings, "gold").json()["id"])
    assert (gold["state"], gold["exit_code"]) == ("failed", 1)
    assert any("GateNotPassed" in line for line in gold["log"]), gold["log"][-3:]
    gate = _wait(settings, _submit(settings, "check_silver").json()["id"])
    assert (gate["state"], gate["exit_code"]) == ("success", 0)

    health = httpx.get(f"{_url(settings)}/health").json()
    assert health["spark"]["application_id"] and health["finished"] == 4


def test_a_bad_request_is_refused_with_the_cli_message(step_server):
    settings = step_server
    unknown = _submit(settings, "nonsense")
    assert unknown.status_code == 400 and "invalid choice: 'nonsense'" in unknown.json()["message"]
    dates = _submit(settings, "silver", "--dates", "2024-02-30")
    assert dates.status_code == 400 and "day is out of range" in dates.json()["message"]
    body = httpx.post(f"{_url(settings)}/steps", json={"step": "bronze"})
    assert body.status_code == 400 and '{"args"' in body.json()["message"]
    assert httpx.get(f"{_url(settings)}/steps/nope").status_code == 404
