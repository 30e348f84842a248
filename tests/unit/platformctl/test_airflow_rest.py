"""Reading the local Airflow's answers: component health and run progress (no server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest

from core.settings import Settings
from platformctl import airflow_rest
from platformctl.airflow_rest import component_health, progress_line, wait_for_next_run


def _health(scheduler: str | None, beat: datetime | None, database: str = "healthy") -> dict:
    return {
        "metadatabase": {"status": database},
        "scheduler": {
            "status": scheduler,
            "latest_scheduler_heartbeat": beat.isoformat() if beat else None,
        },
        "triggerer": {"status": None, "latest_triggerer_heartbeat": None},
        "dag_processor": {"status": None, "latest_dag_processor_heartbeat": None},
    }


def test_api_server_is_healthy_with_its_metadatabase():
    assert component_health(_health(None, None), "api-server") == (True, "metadatabase healthy")
    unhealthy = _health(None, None, database="unhealthy")
    assert component_health(unhealthy, "api-server") == (False, "metadatabase unhealthy")


def test_scheduler_needs_a_recent_heartbeat_from_this_process():
    now = datetime.now(UTC)
    answer = _health("healthy", now - timedelta(seconds=3))
    healthy, detail = component_health(answer, "scheduler", started_at=now - timedelta(seconds=60))
    assert healthy and detail == "heartbeat 3s ago"
    # The heartbeat of a previous (killed) scheduler does not count for the new one.
    assert component_health(answer, "scheduler", started_at=now) == (
        False,
        "no scheduler heartbeat since this process started",
    )
    assert component_health(_health("unhealthy", now), "scheduler") == (
        False,
        "scheduler unhealthy",
    )


def test_a_dag_processor_never_seen_is_not_healthy():
    assert component_health(_health(None, None), "dag-processor") == (
        False,
        "dag-processor not seen yet",
    )


def test_progress_line_lists_tasks_in_the_order_they_started():
    run = {"dag_id": "web_events_ingest", "dag_run_id": "manual__1", "state": "running"}
    tasks = [
        {"task_id": "check_silver", "state": None, "start_date": None},
        {"task_id": "silver", "state": "running", "start_date": "2026-01-01T00:01:00Z"},
        {"task_id": "bronze", "state": "success", "start_date": "2026-01-01T00:00:00Z"},
    ]
    assert progress_line(run, tasks) == (
        "web_events_ingest manual__1: running "
        "(bronze success, silver running, check_silver waiting)"
    )


def test_wait_for_next_run_wants_an_aware_datetime():
    with pytest.raises(ValueError, match="timezone-aware"):
        wait_for_next_run(Settings(), "web_events_views", after=datetime(2026, 1, 1))


def _server_busy_for(requests: int) -> tuple[httpx.Client, list[str]]:
    """A client whose first ``requests`` requests time out, then every one is answered."""
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.method)
        if len(seen) <= requests:
            raise httpx.ReadTimeout("timed out", request=request)
        return httpx.Response(200, json={"state": "running"})

    return httpx.Client(base_url="http://airflow", transport=httpx.MockTransport(answer)), seen


def test_a_read_the_busy_server_did_not_answer_in_time_is_asked_again():
    client, seen = _server_busy_for(2)
    assert airflow_rest._call(client, "GET", "/api/v2/dags/d/dagRuns/r").json() == {
        "state": "running"
    }
    assert seen == ["GET"] * 3


def test_a_read_that_keeps_timing_out_and_a_write_that_timed_out_once_are_errors():
    client, seen = _server_busy_for(10)
    with pytest.raises(airflow_rest.AirflowUnavailable, match="3 times"):
        airflow_rest._call(client, "GET", "/api/v2/dags")
    assert len(seen) == 3
    client, seen = _server_busy_for(1)
    with pytest.raises(airflow_rest.AirflowUnavailable):
        airflow_rest._call(client, "POST", "/api/v2/dags/d/dagRuns", json={})
    assert seen == ["POST"]  # a trigger may have been done: never sent twice
