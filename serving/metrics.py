"""Serving's Prometheus metrics: what the last reconciliation of the two layers found, per view.

On a registry of its own (no globals), filled from the pointers serving
already caches (``reconcile_results`` is read with the boundary and the
speed progress, at most every ``pointer_cache_s``), so a scrape costs no
Cassandra read of its own. Every worker answers the same values.

- ``wap_reconcile_windows_compared{view}``: closed windows the last run compared;
- ``wap_reconcile_windows_differing{view}``: of those, windows where the
  batch and speed rows differ;
- ``wap_reconcile_largest_difference{view}``: the largest relative
  difference of any compared value (1: a row on one side only);
- ``wap_reconcile_drift{view}``: 1 when the windows differing exceed the
  step's threshold (the alert), else 0;
- ``wap_reconcile_checked_timestamp_seconds{view}``: when it ran (alert when
  it stops running: ``time() - ... > 2 * schedule``).

A view never reconciled has none of these series.

Requests, summed over the server's workers (prometheus_client's multiprocess
mode when ``PROMETHEUS_MULTIPROC_DIR`` is set, as :func:`serving.server.serve`
sets it for several workers):

- ``wap_serving_requests_total{route, status}``: answered requests by route
  (its template, e.g. ``/v1/top``) and HTTP status;
- ``wap_serving_request_duration_seconds{route}``: their latency (histogram).

The two layers' progress per view, read from the same pointers (so they go
on moving when the speed job or the batch stops, which is what alerts need):

- ``wap_speed_freshness_seconds{view}``: now - the newest event time the
  speed layer has reflected;
- ``wap_speed_heartbeat_age_seconds{view}``: now - the speed query's last
  reported progress;
- ``wap_speed_kafka_lag_records{view}``: records in Kafka it has not read;
- ``wap_batch_boundary_age_seconds{view}``: now - the batch boundary (the
  last publish moved it); a view never published has none.

And the worker's shared caches (:mod:`serving.cache`), per ``cache``
(``answers``: whole answers, ``blocks``: merged immutable top-N blocks):

- ``wap_serving_cache_lookups{cache, how}``: lookups by how they were
  answered: ``computed``, ``shared`` (an identical request was computing it),
  ``cached``; the hit ratio is ``1 - computed / sum``;
- ``wap_serving_cache_entries{cache}``: entries kept.

``GET /metrics`` takes an analyst token like every data route (the figures
name the views, their freshness and traffic): the local Prometheus scrapes it
with one (``platformctl/services/prometheus.py``), a production one with a
token of its own in ``serving.api_tokens``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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

__all__ = ["ServingMetrics"]


class ServingMetrics:
    """The gauges of one serving worker."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.http_registry = CollectorRegistry()
        self.requests = Counter(
            "wap_serving_requests",
            "Answered requests by route and HTTP status",
            ["route", "status"],
            registry=self.http_registry,
        )
        self.latency = Histogram(
            "wap_serving_request_duration_seconds",
            "Request latency by route",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.http_registry,
        )
        self.reads = Counter(
            "wap_serving_reads",
            "Reads of data by the callers' teams (never a name) and outcome (ok, refused with "
            "its reason's code, failed)",
            ["teams", "outcome"],
            registry=self.http_registry,
        )
        self._reads: dict[tuple[str, str], Any] = {}
        self._children: dict[tuple[str, int], tuple[Any, Any]] = {}
        """Each route and status's request series, by the two (labels() costs a lock)."""
        if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            ProcessCollector(registry=r)
        self.compared = Gauge(
            "wap_reconcile_windows_compared",
            "Closed windows the last reconciliation compared",
            ["view"],
            registry=r,
        )
        self.differing = Gauge(
            "wap_reconcile_windows_differing",
            "Closed windows where the batch and speed rows differed at the last reconciliation",
            ["view"],
            registry=r,
        )
        self.largest = Gauge(
            "wap_reconcile_largest_difference",
            "Largest relative difference of a compared value (1: a row on one side only)",
            ["view"],
            registry=r,
        )
        self.drift = Gauge(
            "wap_reconcile_drift",
            "1 when the last reconciliation found more differing windows than allowed",
            ["view"],
            registry=r,
        )
        self.checked = Gauge(
            "wap_reconcile_checked_timestamp_seconds",
            "When the view was last reconciled (Unix time)",
            ["view"],
            registry=r,
        )

        self.lookups = Gauge(
            "wap_serving_cache_lookups",
            "Cache lookups of this worker since it started, by how they were answered",
            ["cache", "how"],
            registry=r,
        )
        self.entries = Gauge(
            "wap_serving_cache_entries",
            "Entries a cache of this worker keeps",
            ["cache"],
            registry=r,
        )

        self.freshness = Gauge(
            "wap_speed_freshness_seconds",
            "Now minus the newest event time the speed layer has reflected",
            ["view"],
            registry=r,
        )
        self.heartbeat = Gauge(
            "wap_speed_heartbeat_age_seconds",
            "Now minus the speed query's last reported progress",
            ["view"],
            registry=r,
        )
        self.kafka_lag = Gauge(
            "wap_speed_kafka_lag_records",
            "Records in Kafka the speed layer has not read yet",
            ["view"],
            registry=r,
        )
        self.boundary_age = Gauge(
            "wap_batch_boundary_age_seconds",
            "Now minus the view's batch boundary (moved by each publish)",
            ["view"],
            registry=r,
        )

    def observe_layers(self, views: Mapping[str, Any], now_ms: int) -> None:
        """Set the progress gauges from each view's :class:`serving.store.ViewPointers`."""
        for view, p in views.items():
            for gauge, value in (
                (self.freshness, p.newest_event),
                (self.heartbeat, p.heartbeat),
                (self.boundary_age, p.boundary),
            ):
                if value is not None:
                    gauge.labels(view).set(max(0, now_ms - value) / 1000)
            if p.kafka_lag is not None:
                self.kafka_lag.labels(view).set(p.kafka_lag)

    def observe_caches(self, caches: Mapping[str, Any]) -> None:
        """Set the cache gauges from each :class:`serving.cache.SharedCache` by name."""
        for name, cache in caches.items():
            for how in ("computed", "shared", "cached"):
                self.lookups.labels(name, how).set(getattr(cache.stats, how))
            self.entries.labels(name).set(len(cache))

    def observe(self, reconciled: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Set the gauges from each view's last reconciliation (``reconcile_results``)."""
        for view, row in reconciled.items():
            if row is None:
                continue
            self.compared.labels(view).set(row["windows_compared"] or 0)
            self.differing.labels(view).set(row["windows_differing"] or 0)
            self.largest.labels(view).set(row["largest_difference"] or 0.0)
            self.drift.labels(view).set(0 if row["passed"] else 1)
            self.checked.labels(view).set((row["checked_at"] or 0) / 1000)

    def observe_request(self, route: str, status: int, seconds: float) -> None:
        found = self._children.get((route, status))
        if found is None:  # a route and status seen first: look their series up once
            found = self.requests.labels(route, str(status)), self.latency.labels(route)
            self._children[(route, status)] = found
        found[0].inc()
        found[1].observe(seconds)

    def observe_read(self, teams: str, outcome: str) -> None:
        found = self._reads.get((teams, outcome))
        if found is None:
            found = self._reads[(teams, outcome)] = self.reads.labels(teams, outcome)
        found.inc()

    def render(self) -> bytes:
        """This worker's gauges, and the request metrics of all workers."""
        return generate_latest(self.registry) + generate_latest(_HttpOnly(self.http_registry))


class _HttpOnly:
    """The request metrics: summed over every worker's files in multiprocess mode (the
    workers' gauges there too are left out: each worker exports its own), else this one's."""

    _NAMES = frozenset(
        {"wap_serving_requests", "wap_serving_request_duration_seconds", "wap_serving_reads"}
    )

    def __init__(self, own: CollectorRegistry) -> None:
        self.own = own

    def collect(self):
        if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
            yield from self.own.collect()
            return
        merged = CollectorRegistry()
        MultiProcessCollector(merged)
        yield from (family for family in merged.collect() if family.name in self._NAMES)
