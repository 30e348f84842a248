"""The SQL server's ``/health`` and ``/metrics`` on ``sql.health_port``.

``/health`` runs a real query, ``SELECT 1`` over Spark Connect (the path every
analyst takes: gRPC, the guard, the driver), with a time limit of
``sql.health_timeout_s``: not answered, it is 503 ``not_answering`` and the
supervisor (locally, ``python -m serving.connect --supervise``) or the
orchestrator's health check (production) restarts the server. 503 ``starting``
before the first catalog refresh; 200 ``ok``, or ``degraded`` when the catalog
is stale or its refresh fails (the views answer, with older rows).

``/metrics`` (Prometheus text, a registry of its own, the process metrics of
this Python process) adds what the driver keeps (``SqlMetrics.java``):

- ``wap_sql_statements_total{outcome}``: Spark Connect statements by outcome:
  ``succeeded``, ``failed``, ``refused``, ``timed_out``, ``cancelled``;
- ``wap_sql_refusals_total{reason}``: refusals by the guard's reason
  (``unauthenticated``, ``not_granted``, ``concurrency``, ``identity``, ``rpc``,
  ``data_source``, ``read``, ``write``, ``cache``, ``client_code``,
  ``setting``, ``metadata``, ``statement_size``, ``statement_depth``,
  ``partitions``, ``function``, ``pattern``);
- ``wap_sql_team_statements_total{team, outcome}``: audited statements by each
  declared team of the identity (``none``: of no team) and outcome (``ok``,
  ``refused``, ``failed``); never a name;
- ``wap_sql_audit_dropped_total``: audit records the driver dropped because its
  queue was full (the host did not drain it in time);
- ``wap_sql_access_seconds_total{part}``, ``wap_sql_access_runs_total{part}``: the time
  access takes in the driver, by part (``identify``: a call's bearer; ``bind``: its
  request to the identity; ``admit``: the identity's bound; ``grants``: the names a plan
  reads; ``audit``: a record queued);
- ``wap_sql_statement_duration_seconds``: their durations (histogram);
- ``wap_sql_jobs_total{pool}``: Spark jobs by scheduler pool (``analysts``:
  one pool per session; ``platform``: the catalog refresh);
- ``wap_sql_active_sessions``, ``wap_sql_active_statements``;
- ``wap_sql_driver_memory_used_bytes``, ``wap_sql_driver_memory_max_bytes``:
  the driver's heap;
- ``wap_sql_answering``: 1 when the last health query answered in time, else 0
  (the ``SqlServerNotAnswering`` alert); ``wap_sql_health_query_seconds``;
- ``wap_sql_catalog_age_seconds``: since the last catalog refresh;
- ``wap_sql_catalog_failures{pipeline}``: parts of the pipeline (views, its events) the
  last refresh could not make; they keep their last definition while the rest is current.

Nothing here waits on the driver longer than ``sql.health_timeout_s``: a
driver that hangs makes ``/health`` say so instead of hanging too.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from serving.connect.remote import close_session

if TYPE_CHECKING:
    from serving.connect.host import SqlServer

__all__ = ["HEALTH_TAG", "Answer", "HealthProbe", "SqlServerMetrics", "health", "serve_health"]

HEALTH_TAG = "platform-health"
"""The Spark session tag of the health query (``SqlMetrics.HEALTH_TAG``): not counted."""
_HEADER_TIMEOUT_S = 10
"""A client that does not send its request within this is disconnected."""


@dataclass(frozen=True)
class Answer:
    """One health query: answered in time or not, how long it took, what went wrong."""

    answering: bool
    seconds: float | None
    at: float
    error: str | None = None


class _Worker:
    """One daemon thread running calls in turn: a call that never returns (a driver that
    hangs) neither blocks the caller past its timeout nor keeps the process from exiting."""

    def __init__(self, name: str) -> None:
        self._calls: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        while True:
            call, future = self._calls.get()
            try:
                future.set_result(call())
            except BaseException as error:  # handed to the caller
                future.set_exception(error)

    def submit(self, call: Callable[[], Any]) -> Future[Any]:
        future: Future[Any] = Future()
        self._calls.put((call, future))
        return future


class _Asker:
    """A thread and the Connect session it asks on: replaced whole when a query is abandoned,
    so a late answer of an abandoned query never touches the next one's session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.worker = _Worker("sql-probe")
        self.session: Any = None

    def ask(self) -> float:
        from serving.connect.remote import remote_session

        began = time.monotonic()
        if self.session is None:
            self.session = remote_session(self.url)
            self.session.addTag(HEALTH_TAG)
        rows = self.session.sql("SELECT 1 AS answer").collect()
        if rows[0]["answer"] != 1:
            raise RuntimeError(f"SELECT 1 answered {rows!r}")
        return time.monotonic() - began

    def drop_session(self) -> None:
        session, self.session = self.session, None
        close_session(session)


class HealthProbe:
    """``SELECT 1`` over Spark Connect with a time limit; one query at a time, shared.

    A query not answered in time is abandoned with its session (its channel closed, its
    thread left to end on its own) when the next check comes: that check asks again on a
    new session. So one call stuck on the client's side fails one check, not every check
    until a restart; a driver that answers nobody fails them all."""

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.last: Answer | None = None
        self._lock = threading.Lock()
        self._asker = _Asker(url)
        self._running: Future[float] | None = None
        self._started = 0.0

    def check(self, max_age_s: float = 0.0) -> Answer:
        """The last answer if younger than ``max_age_s``, else a new one (waiting at most
        ``timeout_s`` from the query's start; a query still running from before and younger
        than ``timeout_s`` is waited for rather than repeated)."""
        last = self.last
        if last is not None and time.time() - last.at <= max_age_s:
            return last
        with self._lock:
            stuck = self._running is not None and not self._running.done()
            if stuck and time.monotonic() - self._started >= self.timeout_s:
                self._asker.drop_session()
                self._asker, self._running = _Asker(self.url), None
            if self._running is None or self._running.done():
                self._running = self._asker.worker.submit(self._asker.ask)
                self._started = time.monotonic()
            asker, running, started = self._asker, self._running, self._started
        try:
            left = max(0.0, self.timeout_s - (time.monotonic() - started))
            answer = Answer(True, round(running.result(timeout=left), 3), time.time())
        except TimeoutError:
            answer = Answer(
                False,
                None,
                time.time(),
                f"SELECT 1 did not answer within {self.timeout_s:g} s (sql.health_timeout_s)",
            )
        except Exception as error:  # the server refused or failed the query
            asker.drop_session()
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            answer = Answer(False, None, time.time(), f"SELECT 1 failed: {first[:500]}")
        self.last = answer
        return answer


def health(server: SqlServer, probe: HealthProbe) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body) of ``/health``: 503 ``starting`` or ``not_answering``, else 200."""
    built, body = server.catalog_state()
    answer = probe.check()
    body["answering"] = answer.answering
    body["health_query_s"] = answer.seconds
    if not answer.answering:
        body["error"] = answer.error
    if not built:
        return 503, body
    if not answer.answering:
        body["status"] = "not_answering"
        return 503, body
    return 200, body


class SqlServerMetrics:
    """The registry of ``/metrics``: this process's figures and the driver's."""

    def __init__(
        self, server: SqlServer, probe: HealthProbe, driver: Callable[[], str], timeout_s: float
    ) -> None:
        self.server = server
        self.probe = probe
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self.registry.register(self)  # type: ignore[arg-type]
        self._driver = driver
        self._timeout_s = timeout_s
        self._worker = _Worker("sql-metrics")

    def _snapshot(self) -> dict[str, Any] | None:
        try:
            text = self._worker.submit(self._driver).result(timeout=self._timeout_s)
        except Exception:  # the driver does not answer: only this process's figures
            return None
        return json.loads(text)

    def describe(self) -> list[Metric]:
        """Nothing to declare up front (registering must not query the driver)."""
        return []

    def collect(self) -> Iterator[Metric]:
        answer = self.probe.check(max_age_s=self.server.settings.sql.health_interval_s)
        yield GaugeMetricFamily(
            "wap_sql_answering",
            "1 when the last health query (SELECT 1 over Spark Connect) answered in time",
            value=1.0 if answer.answering else 0.0,
        )
        if answer.seconds is not None:
            yield GaugeMetricFamily(
                "wap_sql_health_query_seconds", "The last health query's duration", answer.seconds
            )
        if self.server.refreshed is not None:
            yield GaugeMetricFamily(
                "wap_sql_catalog_age_seconds",
                "Seconds since the last catalog refresh",
                value=time.time() - self.server.refreshed,
            )
        failing = GaugeMetricFamily(
            "wap_sql_catalog_failures",
            "Parts of a pipeline (views, its events) the last catalog refresh could not make",
            labels=["pipeline"],
        )
        for pipeline in self.server.pipelines:
            failing.add_metric([pipeline.name], len(self.server.failures.get(pipeline.name, {})))
        yield failing
        snapshot = self._snapshot()
        if snapshot is not None:
            yield from _driver_metrics(snapshot)


def _driver_metrics(snapshot: dict[str, Any]) -> Iterator[Metric]:
    """The driver's figures (``SqlMetrics.snapshot()``) as metric families."""
    for name, label, text in (
        ("statements", "outcome", "Spark Connect statements by outcome"),
        ("refusals", "reason", "Requests the guard refused, by reason"),
        ("jobs", "pool", "Spark jobs by scheduler pool"),
    ):
        family = CounterMetricFamily(f"wap_sql_{name}", text, labels=[label])
        for value, count in snapshot[name].items():
            family.add_metric([value], count)
        yield family
    teams = CounterMetricFamily(
        "wap_sql_team_statements",
        "Audited statements by the identity's teams and outcome (teams, never names)",
        labels=["team", "outcome"],
    )
    for key, count in snapshot.get("team_statements", {}).items():
        teams.add_metric(key.split("|", 1), count)
    yield teams
    yield CounterMetricFamily(
        "wap_sql_audit_dropped",
        "Audit records the driver dropped (its queue full)",
        value=snapshot.get("audit_dropped", 0),
    )
    runs = CounterMetricFamily(
        "wap_sql_access_runs", "Runs of each part of access in the driver", labels=["part"]
    )
    took = CounterMetricFamily(
        "wap_sql_access_seconds", "Time each part of access took in the driver", labels=["part"]
    )
    for part, (count, nanos) in snapshot.get("access", {}).items():
        runs.add_metric([part], count)
        took.add_metric([part], nanos / 1e9)
    yield runs
    yield took
    duration = snapshot["duration"]
    cumulative, buckets = 0, []
    for bound, count in zip([*duration["bounds"], "+Inf"], duration["counts"], strict=True):
        cumulative += count
        buckets.append((str(bound), cumulative))
    yield HistogramMetricFamily(
        "wap_sql_statement_duration_seconds",
        "Spark Connect statements' durations",
        buckets=buckets,
        sum_value=duration["sum"],
    )
    for key, name, text in (
        ("active_sessions", "wap_sql_active_sessions", "Open Spark Connect sessions"),
        ("active_statements", "wap_sql_active_statements", "Statements being run or read"),
        ("memory_used", "wap_sql_driver_memory_used_bytes", "The driver's heap in use"),
        ("memory_max", "wap_sql_driver_memory_max_bytes", "The driver's largest heap"),
    ):
        if snapshot[key] >= 0:
            yield GaugeMetricFamily(name, text, value=snapshot[key])


def serve_health(server: SqlServer) -> ThreadingHTTPServer:
    """``GET /health`` and ``GET /metrics`` on ``sql.health_port``, in a daemon thread."""
    sql = server.settings.sql
    probe = HealthProbe(sql.url(), sql.health_timeout_s)
    jvm = server.spark._jvm  # type: ignore[attr-defined]
    metrics = SqlServerMetrics(
        server, probe, lambda: str(jvm.platform.sql.SqlMetrics.snapshot()), sql.health_timeout_s
    )

    class Handler(BaseHTTPRequestHandler):
        timeout = _HEADER_TIMEOUT_S

        def do_GET(self) -> None:
            if self.path == "/health":
                status, body = health(server, probe)
                self._send(status, "application/json", json.dumps(body).encode())
            elif self.path == "/metrics":
                text = generate_latest(metrics.registry)
                self._send(200, "text/plain; version=0.0.4; charset=utf-8", text)
            else:
                self._send(404, "application/json", b'{"error": "GET /health or /metrics"}')

        def _send(self, status: int, media: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", media)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: Any) -> None:
            pass

    host = "127.0.0.1" if sql.host != "0.0.0.0" else "0.0.0.0"
    http = ThreadingHTTPServer((host, sql.health_port), Handler)
    threading.Thread(target=http.serve_forever, name="sql-health", daemon=True).start()
    return http
