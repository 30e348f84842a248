"""``BatchStepOperator``: a DAG task that runs its step on the batch step server.

A helper of ``dags/pipeline_factory.py``, not a DAG file (``.airflowignore``).
The task sends the step's command-line arguments (the ones a
``spark-submit`` of ``batch_layer/__main__.py`` would get) to the step
server (``python -m batch_layer serve``, :mod:`batch_layer.server_http`) with
the server's bearer token, copies the step's log lines into the task log
while it runs, and ends as the step ends: exit code 0 succeeds; 3 (a failed
quality gate), 4 (the layers disagree) or 1 fail the task, with the reason.

Killing the task, or its ``execution_timeout``, cancels the step. A retry
whose step is still running from the earlier attempt (the server answers
409 naming it) follows that request instead of failing: if it completed,
the retry succeeds with it; if it was cancelled or failed, the retry
submits the step again. A step server that restarted while the step ran no
longer knows the request: the task fails saying so, and its retry submits
the step again. Personal ids among the arguments (``forget --user ID``) are
masked in Airflow's task log and never logged by the operator. Imports no
Spark: it runs in Airflow's venv.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator
from airflow.sdk.log import mask_secret
from pydantic import SecretStr

from batch_layer.personal import personal_values, redact_args

__all__ = ["BatchStepOperator"]

_WHY = {
    3: "a quality gate failed: the report named in the log says which expectation; "
    "nothing was published",
    4: "the speed and batch views disagree: the report is in the log",
    1: "the step failed: see the traceback in the log",
}
_RUNNING = ("running", "cancelling")


def _message(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("message"))
    except ValueError:
        return answer.text[:300]


class BatchStepOperator(BaseOperator):
    """Run ``application_args`` (``STEP --pipeline P --run-id R ...``) on the step server."""

    template_fields: Sequence[str] = ("application_args",)
    ui_color = "#f4a460"

    def __init__(
        self,
        *,
        server: str,
        application_args: list[str],
        token: SecretStr,
        poll_s: float = 1.0,
        unreachable_s: float = 60.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.server = server.rstrip("/")
        self.application_args = application_args
        self.poll_s = poll_s
        self.unreachable_s = unreachable_s
        self._token = token
        self._request: str | None = None

    def _client(self, timeout: float = 30) -> httpx.Client:
        bearer = {"Authorization": f"Bearer {self._token.get_secret_value()}"}
        return httpx.Client(base_url=self.server, timeout=timeout, headers=bearer)

    def execute(self, context: Any) -> dict[str, Any] | None:
        for value in personal_values(self.application_args):
            mask_secret(value)
        shown = " ".join(redact_args(self.application_args))
        with self._client() as client:
            run = self._submit(client, shown)
        if run["state"] != "success":
            code = run["exit_code"]
            why = (
                "it was cancelled before it completed"
                if run["state"] == "cancelled"
                else _WHY.get(code, _WHY[1])
            )
            raise AirflowException(
                f"Step {shown} {run['state']} (exit code {code}) after {run['seconds']} s: "
                f"{why}." + (f" {run['summary'].get('failed')}" if run.get("summary") else "")
            )
        self.log.info("Step done in %s s", run["seconds"])
        return run["summary"]

    def _submit(self, client: httpx.Client, shown: str) -> dict[str, Any]:
        """Submit the step and follow it to its end; follow an earlier attempt's request
        of the same step instead while it runs."""
        waiting = False
        while True:
            answer = self._call(client, "POST", "/steps", json={"args": self.application_args})
            if answer.status_code == 202:
                self._request = answer.json()["id"]
                self.log.info("Step request %s: %s", self._request, shown)
                return self._follow(client, self._request, shown)
            running = answer.json().get("running") if answer.status_code == 409 else None
            if running is None:
                raise AirflowException(
                    f"The step server at {self.server} refused {shown}: "
                    f"{answer.status_code} {_message(answer)}"
                )
            if running["args"] == redact_args(self.application_args):
                self._request = running["id"]
                self.log.info(
                    "Step request %s of an earlier attempt of this task is %s: following it",
                    running["id"],
                    running["state"],
                )
                run = self._follow(client, running["id"], shown)
                if run["state"] == "success":
                    return run
                self.log.info("It ended %s: submitting the step again", run["state"])
                continue
            if not waiting:
                self.log.info("Waiting for the pipeline's running step: %s", _message(answer))
                waiting = True
            time.sleep(self.poll_s * 5)

    def _follow(self, client: httpx.Client, request: str, shown: str) -> dict[str, Any]:
        """Poll the request, copying its log lines, until it has ended."""
        since, silent_since = 0, None
        while True:
            try:
                answer = client.get(f"/steps/{request}", params={"since": since})
            except httpx.TransportError as error:
                silent_since = silent_since or time.monotonic()
                if time.monotonic() - silent_since > self.unreachable_s:
                    raise AirflowException(
                        f"The step server at {self.server} has not answered for "
                        f"{self.unreachable_s:.0f} s while step request {request} ({shown}) "
                        f"ran ({error}): is it running (`python -m platformctl status`)? The "
                        "task fails; its retry submits the step again."
                    ) from error
                time.sleep(self.poll_s)
                continue
            silent_since = None
            if answer.status_code == 404:
                raise AirflowException(
                    f"The step server at {self.server} no longer knows step request {request} "
                    f"({shown}): it restarted while the step ran, so the step stopped before "
                    "it reported. The task fails; its retry submits the step again (every "
                    "step can be rerun)."
                )
            if answer.status_code != 200:
                raise AirflowException(
                    f"The step server at {self.server} answered {answer.status_code} for step "
                    f"request {request}: {_message(answer)}"
                )
            run = answer.json()
            for line in run["log"]:
                self.log.info("%s", line)
            since = run["next"]
            if run["state"] not in _RUNNING:
                return run
            time.sleep(self.poll_s)

    def _call(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return client.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise AirflowException(
                f"The step server at {self.server} did not answer {method} {path} ({error}): "
                "start it with `python -m platformctl up batch`."
            ) from error

    def on_kill(self) -> None:
        if self._request is None:
            return
        try:
            with self._client(timeout=10) as client:
                answer = client.delete(f"/steps/{self._request}")
            self.log.info("Cancel of step request %s: %s", self._request, answer.status_code)
        except httpx.HTTPError as error:
            self.log.warning("Could not cancel step request %s: %s", self._request, error)
