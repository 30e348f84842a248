"""The batch step server over HTTP: ``python -m batch_layer serve`` (:mod:`batch_layer.server`).

Every ``/steps`` route takes ``Authorization: Bearer <settings.batch.step_server_token>``
(401 without it, or with an empty one); the DAGs' :class:`BatchStepOperator` sends it.

- ``POST /steps`` with ``Content-Type: application/json`` and
  ``{"args": [STEP, "--pipeline", P, "--run-id", R, ...]}``: the step's
  command-line arguments, checked by the CLI's own parser (400 with its
  message). Answers 202 ``{"id"}``; 409 while a step of the same pipeline
  runs, naming that request (``running``: its id, arguments and state). Any
  other content type is refused with 415 before the body is read: a web
  page's cross-site form (``text/plain``, a form encoding) never gets a step
  run. A body over 64 KiB: 413.
- ``GET /steps/{id}?since=N``: ``state`` (running, cancelling, success,
  failed, cancelled), ``exit_code`` (the CLI's: 0, 3 gate failed, 4 layers
  disagree, 1 any other error), the JSON ``summary`` and the step's log
  lines from the N-th on (``next``); 404 for a request the server does not
  hold (it restarted, or the request is older than its history).
- ``DELETE /steps/{id}``: cancels the step (a killed or timed-out task);
  202 with its state, ``cancelling`` until it has stopped.
- ``GET /metrics`` (Prometheus, :mod:`batch_layer.metrics`) takes the
  operators' ``Authorization: Bearer <settings.monitoring.metrics_token>``
  (401 without it); the local Prometheus sends it.
- ``GET /health`` answers anyone 200 ``{"status": "ok"}`` or 503 (a load
  balancer's probe); with the metrics token, also its figures: the Spark
  application, the steps running and the last ones
  (:func:`core.credentials.health_for`). Neither holds a personal id.
  ``/health`` answers 503 ``driver_lost`` once the server's Spark driver
  has ended, and the server then exits 1 (``steps.driver_lost`` in its log).

A connection that sends nothing for ``settings.batch.step_header_timeout_s``
while the server reads its request is closed.
"""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from batch_layer.server import Busy, StepRun, StepServer, import_step_modules
from core.credentials import METRICS_TOKEN_HINT, bearer_of, health_for, owner_of
from core.log import configure_logging, get_logger, log_event
from core.settings import BatchSettings, Settings

__all__ = ["MAX_BODY_BYTES", "handler", "main"]

MAX_BODY_BYTES = 64 * 1024
DRIVER_POLL_S = 1.0
"""How often the server checks that its Spark driver still runs."""
DEV_TOKEN = BatchSettings().step_server_token
"""The local development token, refused outside ``environment=local``."""
_log = get_logger(__name__)


def handler(server: StepServer, settings: Settings) -> type[BaseHTTPRequestHandler]:
    """The request handler class of ``server``."""
    steps = [("steps", settings.batch.step_server_token.get_secret_value().encode())]
    operators = [("operator", settings.monitoring.metrics_token.get_secret_value().encode())]

    class Handler(BaseHTTPRequestHandler):
        timeout = settings.batch.step_header_timeout_s  # each read of the request

        def _send(self, status: int, body: dict[str, Any], **headers: str) -> None:
            data = json.dumps(body, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _presents(self, tokens: list[tuple[str, bytes]]) -> bool:
            """Whether the request's bearer credential is one of ``tokens`` (never an empty
            one)."""
            return owner_of(bearer_of(self.headers.get("Authorization")), tokens) is not None

        def _authorized(self) -> bool:
            if self._presents(steps):
                return True
            message = (
                "Send the step server's token: Authorization: Bearer <token> "
                "(settings.batch.step_server_token, WAP_BATCH__STEP_SERVER_TOKEN)."
                if bearer_of(self.headers.get("Authorization")) is None
                else "Unknown token: the step server and its clients must share "
                "WAP_BATCH__STEP_SERVER_TOKEN."
            )
            self._send(401, {"message": message}, **{"WWW-Authenticate": "Bearer"})
            return False

        def _run(self) -> StepRun | None:
            request = urlparse(self.path).path.rsplit("/", 1)[-1]
            run = server.runs.get(request)
            if run is None:
                self._send(
                    404,
                    {
                        "message": f"No step request {request!r} on this step server: it "
                        "restarted since, or the request is older than its history "
                        "(settings.batch.step_history)."
                    },
                )
            return run

        def do_GET(self) -> None:
            url = urlparse(self.path)
            if url.path == "/health":
                health = server.health()
                status = 200 if health["status"] == "ok" else 503
                self._send(status, health_for(self._presents(operators), health))
            elif url.path == "/metrics" and not self._presents(operators):
                self._send(401, {"message": METRICS_TOKEN_HINT}, **{"WWW-Authenticate": "Bearer"})
            elif url.path == "/metrics":
                data = server.metrics.render()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            elif not url.path.startswith("/steps/"):
                self._send(404, {"message": f"No route {url.path!r}."})
            elif self._authorized() and (run := self._run()):
                try:
                    since = int(parse_qs(url.query).get("since", ["0"])[0])
                except ValueError:
                    self._send(400, {"message": "since must be a line number (an integer)."})
                    return
                self._send(200, run.view(since))

        def _refused_body(self) -> bool:
            """Answer 415, 401, 400 or 413 and say True when the body must not be read."""
            given = self.headers.get("Content-Type")
            if given is None or self.headers.get_content_type() != "application/json":
                self._send(
                    415,
                    {
                        "message": f"POST /steps takes Content-Type: application/json, not "
                        f"{given!r}: send the step's arguments as JSON "
                        '{"args": [STEP, "--pipeline", ...]}.'
                    },
                )
                return True
            if not self._authorized():
                return True
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                self._send(400, {"message": "Content-Length must be a number of bytes."})
                return True
            if length > MAX_BODY_BYTES:
                self._send(413, {"message": f"A step request is at most {MAX_BODY_BYTES} bytes."})
                return True
            return False

        def do_POST(self) -> None:
            if urlparse(self.path).path != "/steps":
                self._send(404, {"message": f"No route {urlparse(self.path).path!r}."})
                return
            if self._refused_body():
                return
            try:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                argv = body.get("args") if isinstance(body, dict) else None
                if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                    raise ValueError('The body must be {"args": [STEP, "--pipeline", ...]}.')
                run = server.submit(argv)
            except (ValueError, json.JSONDecodeError) as error:
                self._send(400, {"message": str(error)})
            except Busy as busy:
                running = busy.running
                self._send(
                    409,
                    {
                        "message": str(busy),
                        "running": {"id": running.id, "args": running.args, "state": running.state},
                    },
                )
            else:
                self._send(202, {"id": run.id})

        def do_DELETE(self) -> None:
            if not urlparse(self.path).path.startswith("/steps/"):
                self._send(404, {"message": f"No route {urlparse(self.path).path!r}."})
            elif self._authorized() and (run := self._run()):
                server.cancel(run)
                self._send(202, run.view(len(run.log)))

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
    if settings.environment != "local" and settings.batch.step_server_token == DEV_TOKEN:
        parser.error(
            f"environment={settings.environment} with the local development step server "
            "token: set WAP_BATCH__STEP_SERVER_TOKEN (the same for Airflow's workers)."
        )
    started = time.monotonic()
    warm = threading.Thread(target=import_step_modules, name="import-steps")
    warm.start()  # Python's imports while the JVM starts: neither waits for the other
    spark = build_spark_session(settings, app_name="batch-steps", lineage=True)
    warm.join()
    server = StepServer(spark, settings)
    server.install_log_scrubber()
    address = (settings.batch.step_server_host, settings.batch.step_server_port)
    httpd = ThreadingHTTPServer(address, handler(server, settings))
    log_event(
        _log,
        "steps.serving",
        host=address[0],
        port=address[1],
        spark=spark.sparkContext.applicationId,
        start_s=round(time.monotonic() - started, 1),
    )
    lost = threading.Event()
    threading.Thread(
        target=_watch_driver, args=(server, httpd, lost), name="watch-driver", daemon=True
    ).start()
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()
        driver_lost = lost.is_set()
        if not driver_lost:
            spark.stop()
    return 1 if driver_lost else 0


def _watch_driver(server: StepServer, httpd: ThreadingHTTPServer, lost: threading.Event) -> None:
    """Stop serving once the Spark driver has ended: the process exits 1 and whatever runs
    it (platformctl, a container's orchestrator) sees a stopped service, not one that takes
    steps and fails each at once."""
    while (code := server.driver_exit_code()) is None:
        time.sleep(DRIVER_POLL_S)
    lost.set()
    log_event(_log, "steps.driver_lost", logging.ERROR, exit_code=code, finished=server.finished)
    httpd.shutdown()
