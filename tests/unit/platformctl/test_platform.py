"""The platform's process table and its loop over the service records (``sleep`` children only)."""

from __future__ import annotations

import sys
from functools import partial

import pytest

from core.settings import AirflowSettings, LocalSettings, Settings
from platformctl import platform
from platformctl.process import ManagedProcess
from platformctl.services import Service


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


def _sleeper(settings: Settings, name: str) -> ManagedProcess:
    """A Python child whose command line carries its pid file, as a service's carries its config."""
    pid_file = settings.local.state_dir / "run" / f"{name}.pid"
    return ManagedProcess(
        name=name,
        argv=[sys.executable, "-c", "import time; time.sleep(60)", str(pid_file)],
        pid_file=pid_file,
        log_file=settings.local.state_dir / "logs" / f"{name}.log",
        marker=str(pid_file),
    )


def test_up_runs_each_records_steps_and_down_stops_in_reverse(tmp_path, monkeypatch):
    settings = Settings(local=LocalSettings(state_dir=tmp_path / "state", start_timeout_s=10))
    steps: list[str] = []

    def install(settings: Settings) -> None:
        steps.append("install venv")

    def record(name: str, *, shared_install: bool = False) -> Service:
        return Service(
            name=name,
            process=partial(_sleeper, name=name),
            probe=lambda s: (_sleeper(s, name).pid() is not None, f"{name} probed"),
            install=install if shared_install else lambda s: steps.append(f"jars {name}"),
            prepare=lambda s: steps.append(f"prepare {name}"),
            provision=lambda s: steps.append(f"provision {name}"),
        )

    registry = (
        record("store"),
        record("web", shared_install=True),
        record("worker", shared_install=True),
    )
    monkeypatch.setattr(platform, "REGISTRY", registry)
    names = ("store", "web", "worker")
    try:
        timings = platform.up(settings, names)
        assert list(timings) == list(names)
        assert steps == [
            "jars store",
            "install venv",  # one install shared by two services runs once
            "prepare store",
            "provision store",
            "prepare web",
            "provision web",
            "prepare worker",
            "provision worker",
        ]
        rows = platform.status(settings)
        assert [(r.name, r.running, r.healthy, r.detail) for r in rows] == [
            (name, True, True, f"{name} probed") for name in names
        ]

        pids = [r.pid for r in rows]

        # Up again: nothing is prepared or started, everything is provisioned again.
        steps.clear()
        assert platform.up(settings, names, install_missing=False) == dict.fromkeys(names, 0.0)
        assert steps == [f"provision {name}" for name in names]
        assert [r.pid for r in platform.status(settings)] == pids
    finally:
        stopped = platform.down(settings, names)
    assert stopped == ["worker", "web", "store"]
    assert [(r.running, r.detail) for r in platform.status(settings)] == [
        (False, "not running")
    ] * 3


def test_up_names_the_unknown_service():
    with pytest.raises(ValueError, match=r"Unknown service\(s\) \['kafak'\]"):
        platform.up(Settings(), ("kafak",))


def test_a_service_its_settings_do_not_run_is_neither_started_nor_listed(tmp_path, monkeypatch):
    settings = Settings(local=LocalSettings(state_dir=tmp_path / "state", start_timeout_s=10))

    def record(name: str, runs: bool) -> Service:
        return Service(
            name=name,
            process=partial(_sleeper, name=name),
            probe=lambda s: (_sleeper(s, name).pid() is not None, f"{name} probed"),
            enabled=lambda s: runs,
        )

    monkeypatch.setattr(platform, "REGISTRY", (record("node-1", True), record("node-2", False)))
    try:
        assert list(platform.up(settings, ("node-1", "node-2"))) == ["node-1"]
        assert [row.name for row in platform.status(settings)] == ["node-1"]
        # Running anyway (started with other settings): listed, and stopped by down.
        _sleeper(settings, "node-2").start()
        assert [row.name for row in platform.status(settings)] == ["node-1", "node-2"]
    finally:
        assert platform.down(settings, ("node-1", "node-2")) == ["node-2", "node-1"]
