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
