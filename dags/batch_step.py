"""``BatchStepOperator``: a DAG task that runs its step on the batch step server.

A helper of ``dags/pipeline_factory.py``, not a DAG file (``.airflowignore``).
The task sends the step's command-line arguments (the ones a
``spark-submit`` of ``batch_layer/__main__.py`` would get) to the step
server (``python -m batch_layer serve``, :mod:`batch_layer.server`), copies
the step's log lines into the task log while it runs, and ends as the step
ends: exit code 0 succeeds; 3 (a failed quality gate), 4 (the layers
disagree) or 1 fail the task, with the reason. Killing the task cancels the
step's Spark jobs. Imports no Spark: it runs in Airflow's venv.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

__all__ = ["BatchStepOperator"]

_WHY = {
    3: "a quality gate failed: the report named in the log says which expectation; "
    "nothing was published",
    4: "the speed and batch views disagree: the report is in the log",
    1: "the step failed: see the traceback in the log",
}


class BatchStepOperator(BaseOperator):
    """Run ``application_args`` (``STEP --pipeline P --run-id R ...``) on the step server."""

    template_fields: Sequence[str] = ("application_args",)
    ui_color = "#f4a460"

    def __init__(
        self,
        *,
        server: str,
        application_args: list[str],
        poll_s: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.server = server.rstrip("/")
        self.application_args = application_args
        self.poll_s = poll_s
        self._request: str | None = None

    def execute(self, context: Any) -> dict[str, Any] | None:
        with httpx.Client(base_url=self.server, timeout=30) as client:
            answer = client.post("/steps", json={"args": list(self.application_args)})
            if answer.status_code != 202:
                raise AirflowException(
                    f"The step server at {self.server} refused {self.application_args}: "
                    f"{answer.status_code} {answer.json().get('message')}"
                )
            self._request = answer.json()["id"]
            self.log.info("Step request %s: %s", self._request, " ".join(self.application_args))
            since = 0
            while True:
                run = client.get(f"/steps/{self._request}", params={"since": since}).json()
                for line in run["log"]:
                    self.log.info("%s", line)
                since = run["next"]
                if run["state"] != "running":
                    break
                time.sleep(self.poll_s)
        if run["state"] != "success":
            code = run["exit_code"]
            raise AirflowException(
                f"Step {' '.join(self.application_args)} {run['state']} "
                f"(exit code {code}) after {run['seconds']} s: {_WHY.get(code, _WHY[1])}."
                + (f" {run['summary'].get('failed')}" if run.get("summary") else "")
            )
        self.log.info("Step done in %s s", run["seconds"])
        return run["summary"]

    def on_kill(self) -> None:
        if self._request is not None:
            httpx.delete(f"{self.server}/steps/{self._request}", timeout=10)
