"""The platform's process table: what ``up`` starts and ``down`` stops (nothing started)."""

from __future__ import annotations

from core.settings import AirflowSettings, LocalSettings, Settings
from platformctl import platform


def test_airflow_is_three_processes_from_its_venv_stopped_scheduler_first(tmp_path):
    settings = Settings(
        local=LocalSettings(state_dir=tmp_path / "state"),
        airflow=AirflowSettings(home=tmp_path / "airflow", api_port=18080),
    )
    managed = platform.processes(settings)
    # down stops in reverse: the scheduler before the api-server its tasks report to.
    assert (
        list(managed)[-3:]
        == list(platform.AIRFLOW_SERVICES)
        == [
            "airflow-api-server",
            "airflow-dag-processor",
            "airflow-scheduler",
        ]
    )
    for name in platform.AIRFLOW_SERVICES:
        process = managed[name]
        assert process.argv[0] == str(settings.airflow.venv / "bin" / "airflow")
        assert process.marker == str(process.pid_file) and process.marker in process.argv
        assert process.log_file == tmp_path / "state" / "logs" / f"{name}.log"
        assert process.env["AIRFLOW_HOME"] == str(tmp_path / "airflow")
        assert "WAP_SPARK" in process.env
    api = managed["airflow-api-server"]
    assert api.ports == (18080,)
    assert api.title == "airflow api_server -- host:127.0.0.1 port:18080"
    assert managed["airflow-scheduler"].ports == () and managed["airflow-scheduler"].title is None


def test_speed_view_health_reports_a_watermark_ahead_of_now_as_an_error():
    from datetime import UTC, datetime, timedelta

    from platformctl.platform import view_progress_health

    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    minute = timedelta(minutes=1)
    base = {"heartbeat_at": (now - timedelta(seconds=5)).replace(tzinfo=None), "kafka_lag": 0}
    poisoned = base | {
        "watermark": datetime(9999, 12, 31, 23, 49, 59),
        "max_event_time": datetime(9999, 12, 31, 23, 59, 59),
    }
    ok, text = view_progress_health("page_activity", poisoned, now, minute)
    assert not ok and "ERROR watermark 9999-12-31T23:49:59+00:00 is ahead of now" in text

    at_tolerance = base | {"watermark": (now + minute).replace(tzinfo=None)}
    assert view_progress_health("v", at_tolerance, now, minute)[0]

    healthy = base | {
        "watermark": (now - 10 * minute).replace(tzinfo=None),
        "max_event_time": (now - timedelta(seconds=3)).replace(tzinfo=None),
        "future_rows_dropped": 2,
    }
    ok, text = view_progress_health("v", healthy, now, minute)
    assert ok and "fresh 3s" in text and "future dropped 2" in text
    assert view_progress_health("v", None, now, minute) == (False, "v: no recent progress")
