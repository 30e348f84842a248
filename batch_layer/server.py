"""The batch step server: one long-lived Spark application the DAGs' tasks submit steps to.

A ``spark-submit`` per Airflow task starts a JVM, a SparkSession and Delta's
caches every time: ~20-30 s per task on two cores, so an hourly pipeline of
seven tasks spent most of its minutes starting. ``python -m batch_layer
serve`` (the ``batch`` service of ``platformctl``) holds one SparkSession, a
driver like Livy's or Spark Connect's, and runs each step it is sent with
the same code as ``python -m batch_layer STEP`` (:func:`batch_layer.__main__.run_steps`):

- ``POST /steps`` ``{"args": [STEP, "--pipeline", P, "--run-id", R, ...]}``:
  the step's command-line arguments, checked by the CLI's own parser (400
  with its message). Answers 202 ``{"id"}``; 409 while a step of the same
  pipeline runs (the Airflow pool runs them one at a time anyway).
- ``GET /steps/{id}?since=N``: ``state`` (running, success, failed,
  cancelled), ``exit_code`` (the CLI's: 0, 3 gate failed, 4 layers
  disagree, 1 any other error), the JSON ``summary`` and the step's log
  lines from the N-th on (``next``).
- ``DELETE /steps/{id}``: cancels the step's Spark jobs (a killed task).
- ``GET /metrics``: Prometheus metrics of the steps run (:mod:`batch_layer.metrics`).
- ``GET /health``: the Spark application, the steps running and the last
  ones' durations.

Each request runs in a thread of its own on a new session of the one
SparkContext (``spark.newSession()``: its own SQL settings, the shared
executors and caches), in a Spark job group named after it. A task that
must run on a cluster instead uses ``WAP_BATCH__RUNNER=submit``: the same
DAGs then ``spark-submit`` every step (``dags/pipeline_factory.py``).
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlparse

from batch_layer.metrics import BatchMetrics
from core.log import JsonFormatter, configure_logging, get_logger, log_event
from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["StepRun", "StepServer", "main"]

_log = get_logger(__name__)


@dataclass
class StepRun:
    """One request: its arguments, its state and what it logged."""

    id: str
    args: list[str]
    pipeline: str
    started: float = field(default_factory=time.time)
    state: str = "running"
    exit_code: int | None = None
    summary: dict[str, Any] | None = None
    log: list[str] = field(default_factory=list)
    finished: float | None = None

    def view(self, since: int = 0) -> dict[str, Any]:
        return {
            "id": self.id,
            "args": self.args,
            "state": self.state,
            "exit_code": self.exit_code,
            "summary": self.summary,
            "seconds": round((self.finished or time.time()) - self.started, 2),
            "log": self.log[since:],
            "next": len(self.log),
        }


class _Capture(logging.Handler):
    """Copies the log records of one thread (a step run) into its run's log."""

    def __init__(self, run: StepRun, thread: int) -> None:
        super().__init__()
        self.run, self.thread = run, thread
        self.setFormatter(JsonFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.run.log.append(self.format(record))


class StepServer:
    """The steps submitted to one SparkSession, and their runs."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark, self.settings = spark, settings
        self.runs: dict[str, StepRun] = {}
        self._busy: dict[str, str] = {}  # pipeline -> id of its running request
        self._lock = threading.Lock()
        self.started = time.time()
        self.metrics = BatchMetrics()

    def submit(self, argv: list[str]) -> StepRun:
        """Check ``argv`` (ValueError with the CLI's message) and start the run in a thread;
        :class:`Busy` while the pipeline runs another step."""
        from batch_layer.__main__ import parse_step_args

        args = parse_step_args(list(argv), raising=True)
        with self._lock:
            if args.pipeline in self._busy:
                raise Busy(
                    f"Pipeline {args.pipeline!r} is running step request "
                    f"{self._busy[args.pipeline]}; its steps run one at a time."
                )
            run = StepRun(uuid.uuid4().hex[:12], list(argv), args.pipeline)
            self.runs[run.id] = run
            self._busy[args.pipeline] = run.id
        threading.Thread(target=self._run, args=(run, args), name=f"step-{run.id}").start()
        return run

    def _run(self, run: StepRun, args: argparse.Namespace) -> None:
        from batch_layer.__main__ import run_steps
        from batch_layer.pipelines import pipeline

        capture = _Capture(run, threading.get_ident())
        logging.getLogger().addHandler(capture)
        log_event(_log, "steps.started", id=run.id, args=run.args)
        try:
            session = self.spark.newSession()
            session.sparkContext.setJobGroup(run.id, " ".join(run.args), interruptOnCancel=True)
            spec = pipeline(args.pipeline).validate()
            run.summary, run.exit_code = run_steps(
                session, self.settings, args.steps, spec, args.run_id, args.dates, args.user
            )
        except Exception:  # any failure of a step is the task's failure
            run.log.append(traceback.format_exc())
            run.exit_code = 1
        finally:
            logging.getLogger().removeHandler(capture)
            run.finished = time.time()
            if run.state != "cancelled":
                run.state = "success" if run.exit_code == 0 else "failed"
            with self._lock:
                self._busy.pop(run.pipeline, None)
            self.metrics.observe(run.pipeline, run.args, run.state, run.exit_code, run.summary)
            log_event(
                _log,
                "steps.finished",
                id=run.id,
                args=run.args,
                state=run.state,
                exit_code=run.exit_code,
                seconds=round(run.finished - run.started, 2),
            )

    def cancel(self, run: StepRun) -> None:
        if run.state == "running":
            run.state = "cancelled"
            self.spark.sparkContext.cancelJobGroup(run.id)
            log_event(_log, "steps.cancelled", id=run.id, args=run.args)

    def health(self) -> dict[str, Any]:
        sc = self.spark.sparkContext
        done = [r for r in self.runs.values() if r.finished]
        return {
            "status": "ok",
            "uptime_s": round(time.time() - self.started),
            "spark": {"application_id": sc.applicationId, "master": sc.master},
            "running": [
                r.view(len(r.log)) | {"log": []} for r in self.runs.values() if not r.finished
            ],
            "finished": len(done),
            "last": [
                {"args": r.args, "state": r.state, "seconds": r.view()["seconds"]}
                for r in sorted(done, key=lambda r: r.finished or 0)[-10:]
            ],
        }


class Busy(RuntimeError):
    """The pipeline already runs a step."""


def _handler(server: StepServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _run(self) -> StepRun | None:
            run = server.runs.get(urlparse(self.path).path.rsplit("/", 1)[-1])
            if run is None:
                self._send(404, {"message": f"No step request {self.path!r}."})
            return run

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/health":
                self._send(200, server.health())
            elif url.path == "/metrics":
                data = server.metrics.render()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif url.path.startswith("/steps/") and (run := self._run()):
                since = int(parse_qs(url.query).get("since", ["0"])[0])
                self._send(200, run.view(since))
            elif not url.path.startswith("/steps/"):
                self._send(404, {"message": f"No route {url.path!r}."})

        def do_POST(self) -> None:
            if urlparse(self.path).path != "/steps":
                self._send(404, {"message": f"No route {self.path!r}."})
                return
            try:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                argv = body.get("args") if isinstance(body, dict) else None
                if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                    raise ValueError('The body must be {"args": [STEP, "--pipeline", ...]}.')
                run = server.submit(argv)
            except (ValueError, json.JSONDecodeError) as error:
                self._send(400, {"message": str(error)})
            except Busy as busy:
                self._send(409, {"message": str(busy)})
            else:
                self._send(202, {"id": run.id})

        def do_DELETE(self) -> None:
            if self.path.startswith("/steps/") and (run := self._run()):
                server.cancel(run)
                self._send(200, run.view(len(run.log)))

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are logged as step events, not as access lines

    return Handler


def main(argv: list[str] | None = None) -> int:
    """``python -m batch_layer serve``: start the SparkSession, then serve until stopped."""
    parser = argparse.ArgumentParser(prog="python -m batch_layer serve")
    parser.add_argument("--instance", default=None, help="platformctl's instance marker")
    parser.parse_args(argv)
    configure_logging()

    from core.settings import load_settings
    from core.spark import build_spark_session

    settings = load_settings()
    started = time.monotonic()
    spark = build_spark_session(settings, app_name="batch-steps", lineage=True)
    server = StepServer(spark, settings)
    address = (settings.batch.step_server_host, settings.batch.step_server_port)
    httpd = ThreadingHTTPServer(address, _handler(server))
    log_event(
        _log,
        "steps.serving",
        host=address[0],
        port=address[1],
        spark=spark.sparkContext.applicationId,
        start_s=round(time.monotonic() - started, 1),
    )
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        spark.stop()
    return 0
