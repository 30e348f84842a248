"""The collector's Prometheus metrics, on a registry of its own (no globals), with the
standard process metrics (``process_*``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

__all__ = ["CollectorMetrics"]


@dataclass
class CollectorMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
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
            "collector_suppressions", "Ids on the suppression list held in memory", registry=r
        )
        self.suppressions_lag = Gauge(
            "collector_suppressions_lag",
            "Records of the suppressions topic not applied yet (-1: not measured yet)",
            registry=r,
        )
        self.requests = Counter(
            "collector_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "status"],
            registry=r,
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
            "Records waiting for Kafka acknowledgement",
            registry=r,
        )
