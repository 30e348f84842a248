"""The batch step server runs steps sent over HTTP in its one SparkSession, as DAG tasks do;
it takes orders only with its token and as JSON, shows no personal id, keeps a bounded
history, stops a cancelled step, and drops half-sent requests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from core.settings import PROJECT_ROOT, Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from platformctl.airflow_venv import airflow_env, ensure_airflow_venv
from tests.integration.slow_loris import seconds_until_closed
from tests.support.operator import operator
from tests.support.ports import free_port
from tests.support.processes import java_children
from tests.support.step_server import StepServerProcess
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

HISTORY = 4


@pytest.fixture
def pipeline_settings(pipeline_settings: Settings) -> Settings:
    """This module's step servers keep a short history and drop a silent connection fast."""
    batch = pipeline_settings.batch.model_copy(
        update={"step_history": HISTORY, "step_header_timeout_s": 2.0}
    )
    return pipeline_settings.model_copy(update={"batch": batch})


@pytest.fixture(scope="module")
def quiet_server(local_platform: Settings, tmp_path_factory) -> Iterator[Settings]:
    """One step server for the tests that run no step (refusals, health, slow clients): the
    module's settings, a lake of its own that nothing writes."""
    from core.settings import LakeSettings

    root = tmp_path_factory.mktemp("quiet_step_server")
    batch = local_platform.batch.model_copy(
        update={
            "step_server_port": free_port(),
            "step_history": HISTORY,
            "step_header_timeout_s": 2.0,
            "reports_dir": root / "quality",
        }
    )
    lake = LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "cp"))
    server = StepServerProcess(
        local_platform.model_copy(update={"batch": batch, "lake": lake}), root / "server.log"
    )
    server.start()
    yield server.settings
    server.stop()


def _url(settings: Settings) -> str:
    return f"http://127.0.0.1:{settings.batch.step_server_port}"


def _auth(settings: Settings) -> dict[str, str]:
    return {"Authorization": f"Bearer {settings.batch.step_server_token.get_secret_value()}"}


def _submit(settings: Settings, *args: str) -> httpx.Response:
    run = ["--pipeline", WEB_EVENTS.name, "--run-id", "server-test"]
    return httpx.post(
        f"{_url(settings)}/steps", json={"args": [*args, *run]}, headers=_auth(settings), timeout=30
    )


def _get(settings: Settings, path: str, **params) -> httpx.Response:
    return httpx.get(f"{_url(settings)}{path}", params=params, headers=_auth(settings), timeout=30)


def _wait(settings: Settings, request: str) -> dict:
    lines: list[str] = []
    since = 0
    while True:
        run = _get(settings, f"/steps/{request}", since=since).json()
        lines += run["log"]
        since = run["next"]
        if run["state"] not in ("running", "cancelling"):
            return run | {"log": lines}
        time.sleep(0.5)


def test_steps_run_with_their_logs_and_exit_codes_and_no_answer_or_log_holds_a_forgotten_id(
    step_server_process,
):
    """One server's life: steps run one at a time with their logs and exit codes, a gate
    that has not passed fails the next step, a forgotten user's id is in no answer, refusal
    or log line, and the history keeps only the last few requests."""
    settings = step_server_process.settings
    events = generate(SimulatorConfig(seed=43, events=300, users=20, duplicate_rate=0.05))
    truth = build_truth(events)
    counts = Counter(e.payload.get("userId") for e in events)
    user = max((u for u in counts if u), key=lambda u: counts[u])
    accepted = produce_direct(events, settings)["accepted"]

    first = _submit(settings, "bronze")
    assert first.status_code == 202
    busy = _submit(settings, "silver")  # the same pipeline while bronze runs
    assert busy.status_code == 409 and "one at a time" in busy.json()["message"]
    assert busy.json()["running"]["id"] == first.json()["id"]
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

    health = httpx.get(f"{_url(settings)}/health", headers=operator(settings)).json()
    assert health["spark"]["application_id"] and health["finished"] == 4

    request = _submit(settings, "forget", "--user", user)
    assert request.status_code == 202, request.text
    # While it runs and after: no answer shows the id.
    running = httpx.get(f"{_url(settings)}/health", headers=operator(settings)).text
    assert user not in running
    forget = _wait(settings, request.json()["id"])
    assert forget["state"] == "success", forget["log"][-5:]
    assert forget["args"][forget["args"].index("--user") + 1] == "[redacted]"
    answer = _get(settings, f"/steps/{request.json()['id']}").text
    health = httpx.get(f"{_url(settings)}/health", headers=operator(settings)).text
    assert user not in answer and user not in health
    assert "[redacted]" in health
    # A refused request does not echo it either.
    refused = _submit(settings, "forget", "--user", user, "--dates", "2024-02-30")
    assert refused.status_code == 400 and user not in refused.text

    # More requests have finished than the history holds: the first is gone.
    health = httpx.get(f"{_url(settings)}/health", headers=operator(settings)).json()
    assert health["finished"] == 5 > HISTORY and len(health["last"]) == HISTORY
    assert _get(settings, f"/steps/{first.json()['id']}").status_code == 404

    step_server_process.stop()  # the server's own log, complete
    assert user not in step_server_process.log.read_text()


def test_a_bad_request_is_refused_with_the_cli_message(quiet_server):
    settings = quiet_server
    unknown = _submit(settings, "nonsense")
    assert unknown.status_code == 400 and "invalid choice: 'nonsense'" in unknown.json()["message"]
    dates = _submit(settings, "silver", "--dates", "2024-02-30")
    assert dates.status_code == 400 and "day is out of range" in dates.json()["message"]
    body = httpx.post(f"{_url(settings)}/steps", json={"step": "bronze"}, headers=_auth(settings))
    assert body.status_code == 400 and '{"args"' in body.json()["message"]
    assert _get(settings, "/steps/nope").status_code == 404


def test_only_json_with_the_token_runs_a_step(quiet_server):
    """The attack: a web page's cross-site form (``text/plain``, an ``Origin``) or any local
    caller without the token posting ``forget --user X``. Nothing runs."""
    settings = quiet_server
    url = _url(settings)
    forget = {"args": ["forget", "--pipeline", WEB_EVENTS.name, "--user", "user-000001"]}
    form = httpx.post(
        f"{url}/steps",
        content=json.dumps(forget),
        headers={"Content-Type": "text/plain", "Origin": "https://attacker.example"},
    )
    assert form.status_code == 415 and "application/json" in form.json()["message"]
    with_token = httpx.post(
        f"{url}/steps",
        content=json.dumps(forget),
        headers={"Content-Type": "text/plain;charset=UTF-8", **_auth(settings)},
    )
    assert with_token.status_code == 415
    urlencoded = httpx.post(f"{url}/steps", data={"args": "forget"}, headers=_auth(settings))
    assert urlencoded.status_code == 415
    anonymous = httpx.post(f"{url}/steps", json=forget)
    assert anonymous.status_code == 401 and "Bearer" in anonymous.json()["message"]
    assert anonymous.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(f"{url}/steps", json=forget, headers={"Authorization": "Bearer guess"})
    assert wrong.status_code == 401 and "Unknown token" in wrong.json()["message"]
    assert httpx.get(f"{url}/steps/any").status_code == 401
    assert httpx.delete(f"{url}/steps/any").status_code == 401

    health = httpx.get(f"{url}/health", headers=operator(settings)).json()
    assert (health["running"], health["finished"]) == ([], 0)


def test_connections_that_send_half_a_request_are_closed(quiet_server):
    settings = quiet_server
    # The header timeout is 2 s (pipeline_settings above).
    assert seconds_until_closed(settings.batch.step_server_port) < 6
    assert httpx.get(f"{_url(settings)}/health", headers=operator(settings)).status_code == 200


_OPERATOR = """
import json, os, sys
sys.path.insert(0, os.environ["DAGS"])
from pydantic import SecretStr
from batch_step import BatchStepOperator

operator = BatchStepOperator(
    task_id="step", server=os.environ["SERVER"], application_args=json.loads(os.environ["ARGS"]),
    token=SecretStr(os.environ["STEP_TOKEN"]), poll_s=0.5, unreachable_s=600,
)
print("ready", flush=True)
sys.stdin.readline()  # go
try:
    print(json.dumps({"state": "success", "summary": operator.execute({})}), flush=True)
except Exception as error:
    print(json.dumps({"state": "failed", "error": type(error).__name__, "message": str(error)}))
"""


def _read_lines(pipe, lines: list[str]) -> None:
    for line in pipe:
        lines.append(line)


class _Task:
    """A ``BatchStepOperator`` run in Airflow's venv, as a DAG task runs it: it imports, says
    ready, and executes when :meth:`go` is called."""

    def __init__(self, settings: Settings, step: str, home) -> None:
        python = ensure_airflow_venv(
            settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
        )
        args = [step, "--pipeline", WEB_EVENTS.name, "--run-id", "server-test"]
        env = {
            **os.environ,
            **airflow_env(home, settings.airflow.dags_folder),
            "DAGS": str(settings.airflow.dags_folder),
            "SERVER": _url(settings),
            "ARGS": json.dumps(args),
            "STEP_TOKEN": settings.batch.step_server_token.get_secret_value(),
        }
        self.proc = subprocess.Popen(
            [str(python), "-c", _OPERATOR],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        # The operator logs to stdout, between "ready" and its JSON answer; stderr is read
        # beside it so that neither pipe fills.
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [
            threading.Thread(target=_read_lines, args=(pipe, lines), daemon=True)
            for pipe, lines in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))
        ]
        for reader in self._readers:
            reader.start()
        self.wait_for_log("ready\n", timeout_s=180)

    def log(self) -> str:
        return "".join(self._out) + "".join(self._err)

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def wait_for_log(self, text: str, timeout_s: float = 120) -> None:
        """Until the operator has logged ``text`` (e.g. that the server accepted its step)."""
        deadline = time.monotonic() + timeout_s
        while text not in self.log():
            assert self.proc.poll() is None, self.log()[-3000:]
            assert time.monotonic() < deadline, f"no {text!r} in the task's log"
            time.sleep(0.2)

    def result(self) -> dict:
        self.proc.stdin.close()
        self.proc.wait(900)
        for reader in self._readers:  # each ends at its pipe's end
            reader.join(30)
        answers = [line for line in self._out if line.startswith("{")]
        assert answers, self.log()[-3000:]
        return json.loads(answers[-1]) | {"log": self.log()}


def _a_cancel_before_the_steps_spark_jobs_still_stops_it_and_the_retry_runs(settings):
    """A cancel that arrives while the step is between Spark jobs (here: before its first)
    stops it; the server says ``cancelled`` only once it has stopped, and the retry is not
    refused."""
    events = generate(SimulatorConfig(seed=47, events=200))
    accepted = produce_direct(events, settings)["accepted"]

    request = _submit(settings, "bronze").json()["id"]
    cancel = httpx.delete(f"{_url(settings)}/steps/{request}", headers=_auth(settings))
    assert cancel.status_code == 202 and cancel.json()["state"] in ("cancelling", "cancelled")
    run = _wait(settings, request)
    assert (run["state"], run["cancel_requested"]) == ("cancelled", True), run["log"][-3:]

    retry = _submit(settings, "bronze")
    assert retry.status_code == 202, retry.text
    again = _wait(settings, retry.json()["id"])
    assert again["state"] == "success", again["log"][-8:]
    # The cancelled step wrote nothing: the retry ingests every event.
    assert again["summary"]["steps"]["bronze"]["result"]["rows"] == accepted


def test_a_cancelled_step_stops_and_the_operator_follows_an_earlier_attempt_and_a_restart(
    step_server_process, tmp_path
):
    """A cancelled step stops and its retry runs; a retry whose step still runs from the
    task's earlier attempt follows that request (no 409); a step server restarted under a
    running step fails the task with a message that says so (not ``KeyError: 'log'``). One
    server, each part over events of its own: bronze reads only what it has not read."""
    settings = step_server_process.settings
    _a_cancel_before_the_steps_spark_jobs_still_stops_it_and_the_retry_runs(settings)
    events = generate(SimulatorConfig(seed=53, events=300))
    accepted = produce_direct(events, settings)["accepted"]

    retry = _Task(settings, "bronze", tmp_path / "airflow")
    earlier = _submit(settings, "bronze")  # the earlier attempt, still running
    assert earlier.status_code == 202
    retry.go()
    followed = retry.result()
    assert followed["state"] == "success", followed
    # The earlier request's summary: a step submitted afresh would have found nothing new.
    assert followed["summary"]["steps"]["bronze"]["result"]["rows"] == accepted

    task = _Task(settings, "silver", tmp_path / "airflow")
    task.go()
    # The server has accepted the step and the operator follows it (the server shows a step
    # running a moment before its answer reaches the operator).
    task.wait_for_log("Step request ")
    step_server_process.restart()
    lost = task.result()
    assert (lost["state"], lost["error"]) == ("failed", "AirflowException"), lost
    assert "no longer knows step request" in lost["message"]
    assert "restarted" in lost["message"] and "retry submits the step again" in lost["message"]

    # A server whose Spark driver ended (a JVM error ends it) stops, rather than taking steps
    # and failing each at once.
    server = step_server_process.proc
    (driver,) = java_children(server.pid)
    os.kill(driver, signal.SIGKILL)
    assert server.wait(60) == 1
    assert '"steps.driver_lost"' in step_server_process.log.read_text()
