"""The speed layer's Prometheus metrics, per view, from each micro-batch's progress.

The job's one live query serves every view, so each view's series carry the
query's figures (``view`` tells them apart on dashboards next to serving's
per-view freshness). Served on ``speed.metrics_port`` (``/metrics``) by the
job's process, on a registry of its own, with the standard process metrics.

- ``wap_speed_input_rows_per_second{view}``, ``wap_speed_processed_rows_per_second{view}``:
  the last micro-batch's rates;
- ``wap_speed_batch_duration_seconds{view}``: the last micro-batch's duration;
- ``wap_speed_batches_total{view}``: micro-batches with rows;
- ``wap_speed_query_kafka_lag_records{view}``: records behind the newest, at the last
  progress (serving's ``wap_speed_kafka_lag_records`` is the same, read from Cassandra);
- ``wap_speed_last_progress_timestamp_seconds{view}``: when the query last reported;
- ``wap_speed_pipeline_up{pipeline}``: 1 while the pipeline's query runs, 0 from its
  failure until it runs again; ``wap_speed_pipeline_failures_total{pipeline}``: its failures
  (each followed by a restart in the job, :mod:`speed_layer.streams`);
- ``wap_speed_replay_start_failures_total{pipeline}``: replays whose query failed to start
  (each tried again at a later poll, the wait doubling up to 5 minutes);
- ``wap_speed_late_rows_dropped{view}``, ``wap_speed_future_rows_dropped{view}``,
  ``wap_speed_rejected_rows{view, reason}``: cumulative rows dropped (across restarts:
  the totals the job keeps in ``speed_progress``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, ProcessCollector

from core.log import get_logger, log_event

__all__ = ["SpeedMetrics"]

_log = get_logger(__name__)


class SpeedMetrics:
    """The speed job's gauges; :meth:`observe` is called by the progress listener."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        ProcessCollector(registry=r)

        def gauge(name: str, text: str, labels: tuple[str, ...] = ("view",)) -> Gauge:
            return Gauge(name, text, list(labels), registry=r)

        self.input_rate = gauge("wap_speed_input_rows_per_second", "Input rate, last batch")
        self.processed_rate = gauge(
            "wap_speed_processed_rows_per_second", "Processing rate, last batch"
        )
        self.duration = gauge("wap_speed_batch_duration_seconds", "Last micro-batch's duration")
        self.batches = Counter("wap_speed_batches", "Micro-batches with rows", ["view"], registry=r)
        self.lag = gauge("wap_speed_query_kafka_lag_records", "Kafka records not read yet")
        self.progress_at = gauge(
            "wap_speed_last_progress_timestamp_seconds", "When the query last reported progress"
        )
        self.late = gauge("wap_speed_late_rows_dropped", "Rows later than the watermark (total)")
        self.future = gauge(
            "wap_speed_future_rows_dropped", "Rows ahead of the future tolerance (total)"
        )
        self.up = gauge("wap_speed_pipeline_up", "1 while the pipeline's query runs", ("pipeline",))
        self.failures = Counter(
            "wap_speed_pipeline_failures",
            "Queries of the pipeline that failed",
            ["pipeline"],
            registry=r,
        )
        self.replay_failures = Counter(
            "wap_speed_replay_start_failures",
            "Replay queries of the pipeline that failed to start (each tried again later)",
            ["pipeline"],
            registry=r,
        )
        self.rejected = gauge(
            "wap_speed_rejected_rows", "Rows the input rules rejected (total)", ("view", "reason")
        )

    def observe(
        self, view: str, progress: Any, lag: int | None, counts: Mapping[str, Any] | None
    ) -> None:
        """One progress report of the live query, for ``view``."""
        self.progress_at.labels(view).set(time.time())
        if lag is not None:
            self.lag.labels(view).set(lag)
        if progress is None or not progress.numInputRows:
            return
        self.batches.labels(view).inc()
        self.input_rate.labels(view).set(progress.inputRowsPerSecond or 0)
        self.processed_rate.labels(view).set(progress.processedRowsPerSecond or 0)
        self.duration.labels(view).set((progress.batchDuration or 0) / 1000)
        if counts:
            self.late.labels(view).set(counts.get("late_rows_dropped") or 0)
            self.future.labels(view).set(counts.get("future_rows_dropped") or 0)
            for reason, rows in (counts.get("rejected_rows") or {}).items():
                self.rejected.labels(view, reason).set(rows)

    def pipeline_up(self, pipeline: str, up: bool) -> None:
        """The pipeline's query runs (``up``) or has just failed."""
        self.up.labels(pipeline).set(1 if up else 0)
        if not up:
            self.failures.labels(pipeline).inc()

    def replay_start_failed(self, pipeline: str) -> None:
        """A replay's query of ``pipeline`` failed to start (it is tried again later)."""
        self.replay_failures.labels(pipeline).inc()

    def serve(self, host: str, port: int) -> bool:
        """``/metrics`` on ``host:port``, in a daemon thread; False (logged) when the port is
        taken: the speed layer runs on without its endpoint rather than not at all."""
        from prometheus_client import start_http_server

        try:
            start_http_server(port, addr=host, registry=self.registry)
        except OSError as error:
            log_event(
                _log, "speed.metrics_unavailable", logging.WARNING, port=port, error=str(error)
            )
            return False
        return True
