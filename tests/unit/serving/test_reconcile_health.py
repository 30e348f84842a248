"""What serving says of the last reconciliation of the two layers: /health and its metrics."""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

from layout import RECONCILE_COLUMNS
from serving.freshness import drift_message, reconciliation
from serving.metrics import ServingMetrics

CHECKED = int(datetime(2026, 11, 23, 10, 7, tzinfo=UTC).timestamp() * 1000)


def row(**given) -> dict:
    """A ``reconcile_results`` row as serving reads it (times in epoch ms)."""
    base = dict.fromkeys(RECONCILE_COLUMNS)
    return (
        base
        | {
            "checked_at": CHECKED,
            "window_from": CHECKED - 3_600_000,
            "window_to": CHECKED - 660_000,
            "windows_compared": 49,
            "windows_differing": 0,
            "rows_skipped_late": 3,
            "largest_difference": 0.0,
            "max_differing_windows": 0,
            "passed": True,
            "speed_version": 1,
        }
        | given
    )


def test_no_message_while_every_reconciled_view_passed():
    assert drift_message({"clicks": row(), "page_activity": None}) is None


def test_a_drifting_view_is_named_with_its_windows_and_what_to_do():
    bad = row(passed=False, windows_differing=3, largest_difference=1.0, largest_at="w k only")
    message = drift_message({"clicks": row(), "page_activity": bad})
    assert message == (
        "page_activity: 3 of 49 reconciled windows differ between the speed and batch views "
        "(at most 0 allowed; largest: w k only); replay the speed layer (python -m speed_layer "
        "replay --from earliest --pipeline web_events), then re-run the reconcile task "
        "(docs/operations.md)"
    )


def test_health_shows_each_reconciliation_with_iso_times():
    shown = reconciliation(row())
    assert shown is not None
    assert shown["checked_at"] == "2026-11-23T10:07:00Z"
    assert shown["windows"] == ["2026-11-23T09:07:00Z", "2026-11-23T09:56:00Z"]
    assert shown["passed"] and shown["speed_version"] == 1
    assert reconciliation(None) is None


def test_metrics_carry_every_reconciled_view_and_the_drift_flag():
    metrics = ServingMetrics()
    metrics.observe(
        {
            "clicks": row(),
            "page_activity": row(passed=False, windows_differing=3, largest_difference=1.0),
            "search_terms": None,
        }
    )
    samples = {
        (s.name, s.labels["view"]): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if "view" in s.labels
    }
    assert samples[("wap_reconcile_windows_compared", "clicks")] == 49
    assert samples[("wap_reconcile_windows_differing", "page_activity")] == 3
    assert samples[("wap_reconcile_largest_difference", "page_activity")] == 1.0
    assert samples[("wap_reconcile_drift", "page_activity")] == 1
    assert samples[("wap_reconcile_drift", "clicks")] == 0
    assert samples[("wap_reconcile_checked_timestamp_seconds", "clicks")] == CHECKED / 1000
    assert not [key for key in samples if key[1] == "search_terms"]


def test_metrics_carry_both_layers_progress_as_ages():
    from serving.store import ViewPointers

    now = 1_800_000_000_000
    metrics = ServingMetrics()
    metrics.observe_layers(
        {
            "clicks": ViewPointers(
                boundary=now - 3_600_000,
                newest_event=now - 12_000,
                heartbeat=now - 2_000,
                kafka_lag=40,
            ),
            "search_terms": ViewPointers(boundary=None),  # never published, no speed progress
        },
        now,
    )
    samples = {
        (s.name, s.labels["view"]): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
        if "view" in s.labels
    }
    assert samples[("wap_speed_freshness_seconds", "clicks")] == 12
    assert samples[("wap_speed_heartbeat_age_seconds", "clicks")] == 2
    assert samples[("wap_speed_kafka_lag_records", "clicks")] == 40
    assert samples[("wap_batch_boundary_age_seconds", "clicks")] == 3600
    assert not [key for key in samples if key[1] == "search_terms"]


def test_requests_are_counted_by_route_and_status_with_their_latency():
    metrics = ServingMetrics()
    metrics.observe_request("/v1/top", 200, 0.004)
    metrics.observe_request("/v1/top", 200, 0.3)
    metrics.observe_request("/v1/top", 400, 0.001)
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(metrics.render().decode())
        for s in family.samples
    }
    route = ("route", "/v1/top")
    assert samples[("wap_serving_requests_total", (route, ("status", "200")))] == 2
    assert samples[("wap_serving_requests_total", (route, ("status", "400")))] == 1
    assert samples[("wap_serving_request_duration_seconds_count", (route,))] == 3
    assert samples[("wap_serving_request_duration_seconds_bucket", (("le", "0.005"), route))] == 2
    assert any(name == "process_cpu_seconds_total" for name, _ in samples)


def test_several_workers_requests_are_summed_by_whichever_worker_is_scraped(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    worker = (
        "from serving.metrics import ServingMetrics\n"
        "m = ServingMetrics()\n"
        "m.observe_request('/v1/top', 200, 0.01)\n"
        "print(m.render().decode())\n"
    )
    outputs = [
        subprocess.run(
            [sys.executable, "-c", worker], env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    ]
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(outputs[-1])
        for s in family.samples
    }
    key = ("wap_serving_requests_total", (("route", "/v1/top"), ("status", "200")))
    assert samples[key] == 2  # the first worker's request and its own
