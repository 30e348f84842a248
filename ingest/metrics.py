"""The collector's Prometheus metrics, on a registry of its own (no globals).

With several workers (:mod:`ingest.server`), prometheus_client's multiprocess
mode is on (``PROMETHEUS_MULTIPROC_DIR``, set by :mod:`core.workers`): every
worker writes its values to files there and whichever worker a scrape or a
``/health`` reaches answers for the whole service:

- counters and the histogram are summed over the workers;
- ``collector_producer_queue_depth`` is the sum of the workers' producer queues;
- ``collector_suppressions`` is the smallest list a worker holds,
  ``collector_suppressions_lag`` the largest lag, and
  ``collector_suppressions_loaded`` 1 only when every worker loaded its list;
- ``collector_worker_requests{pid}``: the requests each worker answered since it
  started (one series per live worker: how evenly the kernel spreads connections).

Every worker refreshes its gauges each second (:meth:`CollectorMetrics.observe`),
so the sums are at most that old for the workers a request did not reach. The
standard process metrics (``process_*``) are exported by a single process only
(in multiprocess mode they would be the answering worker's alone).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector

from core.workers import multiprocess_dir

__all__ = ["CollectorMetrics", "ServiceFigures"]


@dataclass(frozen=True)
class ServiceFigures:
    """What ``/health`` says of the whole service (every worker)."""

    queue_depth: int
    suppressions_size: int
    suppressions_lag: int | None
    suppressions_loaded: bool


@dataclass
class CollectorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        if multiprocess_dir() is None:
            ProcessCollector(registry=r)  # process_cpu_seconds_total, resident memory, open fds
        self.accepted = Counter(
            "collector_events_accepted",
            "Events validated and acknowledged by Kafka, by the pipeline they went to",
            ["pipeline"],
            registry=r,
        )
        self.rejected = Counter(
            "collector_events_rejected", "Events rejected, by reason", ["reason"], registry=r
        )
        self.dead_lettered = Counter(
            "collector_events_dead_lettered", "Rejected events written to the DLQ", registry=r
        )
        self.timestamps_clamped = Counter(
            "collector_timestamps_clamped",
            "Accepted events whose time lay in the future and was clamped to receivedAt",
            registry=r,
        )
        self.dropped = Counter(
            "collector_events_dropped",
            "Events dropped and written nowhere, by reason (suppressed: a forgotten user's)",
            ["reason"],
            registry=r,
        )
        self.suppressions = Gauge(
            "collector_suppressions",
            "Ids on the suppression list held in memory (the smallest of the workers' lists)",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.suppressions_lag = Gauge(
            "collector_suppressions_lag",
            "Records of the suppressions topic not applied yet, largest of the workers' "
            "(-1: not measured yet)",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.suppressions_loaded = Gauge(
            "collector_suppressions_loaded",
            "1 when every worker read the suppression list to its end",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.requests = Counter(
            "collector_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
        )
        self.worker_requests = Gauge(
            "collector_worker_requests",
            "HTTP requests this worker answered since it started (label pid: the worker)",
            registry=r,
            multiprocess_mode="liveall",
        )
        self.request_errors = Counter(
            "collector_request_errors",
            "Requests refused whole, by reason",
            ["reason"],
            registry=r,
        )
        self.produce_latency = Histogram(
            "collector_produce_latency_seconds",
            "Time from produce to Kafka acknowledgement, per request",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.queue_depth = Gauge(
            "collector_producer_queue_depth",
            "Records waiting for Kafka acknowledgement (summed over the workers)",
            registry=r,
            multiprocess_mode="livesum",
        )

    def observe(self, queue_depth: int, suppressions: dict[str, Any]) -> None:
        """Set this worker's gauges: its producer's queue and its suppression list's
        ``status()``."""
        self.queue_depth.set(queue_depth)
        self.suppressions.set(suppressions["size"])
        lag = suppressions["lag"]
        self.suppressions_lag.set(-1 if lag is None else lag)
        self.suppressions_loaded.set(1 if suppressions["loaded"] else 0)

    def render(self) -> bytes:
        """The Prometheus text of the service: every worker's, summed, or this process's."""
        return generate_latest(self._service_registry())

    def figures(self) -> ServiceFigures:
        """The service's producer queue and suppression list, as the gauges say."""
        values: dict[str, list[float]] = {}
        for family in self._service_registry().collect():
            for sample in family.samples:
                values.setdefault(sample.name, []).append(sample.value)
        lag = int(values.get("collector_suppressions_lag", [-1])[0])
        return ServiceFigures(
            queue_depth=int(values.get("collector_producer_queue_depth", [0])[0]),
            suppressions_size=int(values.get("collector_suppressions", [0])[0]),
            suppressions_lag=None if lag < 0 else lag,
            suppressions_loaded=values.get("collector_suppressions_loaded", [0])[0] == 1,
        )

    def _service_registry(self) -> Any:
        if multiprocess_dir() is None:
            return self.registry
        merged = CollectorRegistry()
        MultiProcessCollector(merged)
        return merged
