"""The batch step server's Prometheus metrics (``GET /metrics`` on the step server).

Every step request the DAGs' tasks submit ends here, so these are the batch
layer's figures per pipeline and step:

- ``wap_batch_requests_total{pipeline, step, state}``: step requests by how they ended
  (``success``, ``failed``, ``cancelled``; ``step`` is the request's first step);
- ``wap_batch_gate_failures_total{pipeline}``: requests that stopped on a failed quality
  gate (exit code 3); ``wap_batch_drift_total{pipeline}``: reconciliations that found the
  layers apart (exit code 4);
- ``wap_batch_step_duration_seconds{pipeline, step}``: the step's last duration;
- ``wap_batch_step_last_success_timestamp_seconds{pipeline, step}``: when it last succeeded;
- ``wap_batch_step_rows{pipeline, step, kind}``: the row counts the step's last run
  reported (``records``, ``events``, ``rejects``, ``duplicates``, ``rows``...).

A step run as a job of its own (``WAP_BATCH__RUNNER=submit`` or
``emr_serverless``) has no server to scrape: it pushes the same metrics to
the Pushgateway of ``monitoring.pushgateway_url`` (:func:`push`), grouped by
pipeline and step, which Prometheus scrapes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector, generate_latest

__all__ = ["EXIT_STATES", "BatchMetrics", "push"]

EXIT_STATES = {3: "gate_failed", 4: "drift"}
"""The CLI's exit codes that are findings, not crashes."""


class BatchMetrics:
    """Counters and gauges of one step server."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        ProcessCollector(registry=r)
        self.requests = Counter(
            "wap_batch_requests",
            "Step requests by how they ended",
            ["pipeline", "step", "state"],
            registry=r,
        )
        self.gate_failures = Counter(
            "wap_batch_gate_failures",
            "Requests stopped by a failed quality gate",
            ["pipeline"],
            registry=r,
        )
        self.drift = Counter(
            "wap_batch_drift",
            "Reconciliations that found the layers apart",
            ["pipeline"],
            registry=r,
        )
        self.duration = Gauge(
            "wap_batch_step_duration_seconds",
            "The step's last duration",
            ["pipeline", "step"],
            registry=r,
        )
        self.succeeded = Gauge(
            "wap_batch_step_last_success_timestamp_seconds",
            "When the step last succeeded",
            ["pipeline", "step"],
            registry=r,
        )
        self.rows = Gauge(
            "wap_batch_step_rows", "Row counts the step's last run reported",
            ["pipeline", "step", "kind"], registry=r,
        )  # fmt: skip

    def observe(
        self, pipeline: str, args: list[str], state: str, exit_code: int | None,
        summary: Mapping[str, Any] | None,
    ) -> None:  # fmt: skip
        """One finished step request (its arguments, state, exit code and JSON summary)."""
        self.requests.labels(pipeline, args[0] if args else "", state).inc()
        if exit_code == 3:
            self.gate_failures.labels(pipeline).inc()
        elif exit_code == 4:
            self.drift.labels(pipeline).inc()
        for step, done in ((summary or {}).get("steps") or {}).items():
            self.duration.labels(pipeline, step).set(done.get("seconds") or 0)
            self.succeeded.labels(pipeline, step).set(time.time())
            result = done.get("result")
            for kind, value in result.items() if isinstance(result, dict) else ():
                if isinstance(value, int) and not isinstance(value, bool):
                    self.rows.labels(pipeline, step, kind).set(value)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def push(
    url: str, pipeline: str, args: list[str], state: str, exit_code: int | None,
    summary: Mapping[str, Any] | None,
) -> None:  # fmt: skip
    """One step job's metrics to a Pushgateway (replacing that pipeline and step's last);
    a Pushgateway that does not answer is logged, never the step's failure."""
    from prometheus_client import push_to_gateway

    from core.log import get_logger, log_event

    metrics = BatchMetrics()
    metrics.observe(pipeline, args, state, exit_code, summary)
    step = args[0] if args else ""
    try:
        push_to_gateway(
            url, job="wap_batch", grouping_key={"pipeline": pipeline, "step": step},
            registry=metrics.registry, timeout=10,
        )  # fmt: skip
    except OSError as error:
        log_event(get_logger(__name__), "batch.metrics_not_pushed", 30, url=url, error=str(error))
