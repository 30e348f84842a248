"""The speed job's Prometheus metrics from its queries' progress."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from speed_layer.metrics import SpeedMetrics


def _samples(metrics: SpeedMetrics) -> dict[tuple, float]:
    return {
        (s.name, *sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
        if s.name.startswith("wap_")
    }


def test_a_batch_with_rows_sets_rates_duration_lag_and_drops():
    metrics = SpeedMetrics()
    progress = SimpleNamespace(
        numInputRows=500, inputRowsPerSecond=250.0, processedRowsPerSecond=400.0, batchDuration=1250
    )
    counts = {"late_rows_dropped": 7, "future_rows_dropped": 2, "rejected_rows": {"type": 3}}
    metrics.observe("clicks", progress, 42, counts)
    got = _samples(metrics)
    v = ("view", "clicks")
    assert got[("wap_speed_input_rows_per_second", v)] == 250.0
    assert got[("wap_speed_processed_rows_per_second", v)] == 400.0
    assert got[("wap_speed_batch_duration_seconds", v)] == 1.25
    assert got[("wap_speed_query_kafka_lag_records", v)] == 42
    assert got[("wap_speed_late_rows_dropped", v)] == 7
    assert got[("wap_speed_future_rows_dropped", v)] == 2
    assert got[("wap_speed_rejected_rows", ("reason", "type"), v)] == 3
    assert got[("wap_speed_batches_total", v)] == 1


def test_an_idle_progress_only_moves_the_heartbeat():
    metrics = SpeedMetrics()
    metrics.observe("clicks", None, None, None)
    got = _samples(metrics)
    assert ("wap_speed_last_progress_timestamp_seconds", ("view", "clicks")) in got
    assert not [k for k in got if k[0] == "wap_speed_batches_total"]


def test_a_taken_port_leaves_the_job_running_without_its_endpoint():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert SpeedMetrics().serve("127.0.0.1", taken.getsockname()[1]) is False
