"""/health and /metrics say what the batch layer's last reconciliation found, over real HTTP.

``reconcile_results`` rows are written as the ``reconcile`` step writes them:
``page_activity`` drifted (three windows differ), ``clicks`` passed,
``site_activity`` and ``search_terms`` were never reconciled.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.integration

CHECKED = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(scope="module", autouse=True)
def reconciled(cql, serving_settings) -> None:
    from layout import PointerTables

    insert = cql.prepare(PointerTables(serving_settings.cassandra.keyspace).insert_reconcile)
    start, end = CHECKED - timedelta(hours=1), CHECKED - timedelta(minutes=11)
    for view, differing, largest in (("page_activity", 3, 1.0), ("clicks", 0, 0.0)):
        at = f"{start:%Y-%m-%dT%H:%M:00Z} ('/pricing',) only in batch" if differing else None
        cql.execute(
            insert,
            (
                view,
                CHECKED,
                "run-7",
                start,
                end,
                49,
                differing,
                900,
                12 if differing else 0,
                4,
                largest,
                at,
                1,
                0,
                differing == 0,
                "/reports/run-7/reconcile.md",
            ),
        )


def test_health_is_degraded_naming_the_drifting_view_and_what_to_do(api) -> None:
    answer = api.get("/health")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "degraded" and body["error"] == "layers_disagree"
    assert body["message"].startswith(
        "page_activity: 3 of 49 reconciled windows differ between the speed and batch views"
    )
    assert "clicks" not in body["message"]
    assert "python -m speed_layer replay --from earliest" in body["message"]
    shown = body["reconciled"]
    assert shown["page_activity"]["passed"] is False
    assert shown["page_activity"]["report"] == "/reports/run-7/reconcile.md"
    assert shown["clicks"]["windows_differing"] == 0 and shown["clicks"]["speed_version"] == 1
    assert shown["site_activity"] is None


def test_metrics_expose_each_reconciled_view(serving_url, api) -> None:
    answer = api.get("/metrics")
    assert answer.status_code == 200, answer.text
    samples = {
        (s.name, s.labels["view"]): s.value
        for family in text_string_to_metric_families(answer.text)
        for s in family.samples
        if "view" in s.labels  # the others are the caches'
    }
    assert samples[("wap_reconcile_windows_differing", "page_activity")] == 3
    assert samples[("wap_reconcile_drift", "page_activity")] == 1
    assert samples[("wap_reconcile_drift", "clicks")] == 0
    assert samples[("wap_reconcile_windows_compared", "clicks")] == 49
    assert samples[("wap_reconcile_checked_timestamp_seconds", "clicks")] == CHECKED.timestamp()
    assert ("wap_reconcile_drift", "site_activity") not in samples


def test_the_platform_probes_show_the_drift(serving_settings, serving_url) -> None:
    from platformctl.platform import serving_healthy
    from platformctl.services.speed import reconcile_summary

    healthy, detail = serving_healthy(serving_settings)
    assert healthy and "DEGRADED page_activity: 3 of 49 reconciled windows differ" in detail
    assert reconcile_summary(serving_settings).startswith("DRIFT page_activity: 3 of 49 windows")
