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


def test_up_leaves_out_what_the_settings_do_not_run_and_waits_for_ready(tmp_path, monkeypatch):
    settings = Settings(local=LocalSettings(state_dir=tmp_path / "state", start_timeout_s=10))
    waited: list[str] = []

    def ready(settings: Settings, name: str) -> tuple[bool, str]:
        waited.append(name)
        return _sleeper(settings, name).pid() is not None, "started"

    def record(name: str, *, runs: bool) -> Service:
        return Service(
            name=name,
            process=partial(_sleeper, name=name),
            probe=lambda s: (False, "never healthy alone"),
            ready=partial(ready, name=name),
            enabled=lambda s: runs,
        )

    monkeypatch.setattr(
        platform, "REGISTRY", (record("node-1", runs=True), record("node-2", runs=False))
    )
    try:
        assert list(platform.up(settings, ("node-1", "node-2"))) == ["node-1"]
        assert waited and set(waited) == {"node-1"}  # its ready, not its probe
        rows = platform.status(settings)
        assert [(r.name, r.running, r.healthy) for r in rows] == [("node-1", True, False)]

        # One the settings do not run is listed (and stopped) when it runs anyway.
        _sleeper(settings, "node-2").start()
        assert [r.name for r in platform.status(settings)] == ["node-1", "node-2"]
    finally:
        stopped = platform.down(settings, ("node-1", "node-2"))
    assert stopped == ["node-2", "node-1"]
    assert platform.status(settings)[0].detail == "not running"


_VOTER = """
import pathlib, signal, sys, time
here, peers = pathlib.Path(sys.argv[1]), [pathlib.Path(p) for p in sys.argv[2:]]
def stop(*_):
    (here / "signalled").touch()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all((p / "signalled").exists() for p in peers):
        time.sleep(0.05)
    together = all((p / "signalled").exists() for p in peers)
    (here / "result").write_text("together" if together else "alone")
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(here / "ready").touch()
time.sleep(60)
"""


def _voter(settings: Settings, name: str, peers: tuple[str, ...]) -> ManagedProcess:
    """A child that, told to stop, waits (up to 5 s) for its peers to be told too, as a
    quorum member's shutdown needs the others' votes."""
    home = settings.local.state_dir / name
    home.mkdir(parents=True, exist_ok=True)
    others = [str(settings.local.state_dir / peer) for peer in peers if peer != name]
    return ManagedProcess(
        name=name,
        argv=[sys.executable, "-c", _VOTER, str(home), *others],
        pid_file=settings.local.state_dir / "run" / f"{name}.pid",
        log_file=settings.local.state_dir / "logs" / f"{name}.log",
        marker=str(home),
    )


def test_down_stops_the_members_of_a_quorum_at_once(tmp_path, monkeypatch):
    settings = Settings(local=LocalSettings(state_dir=tmp_path / "state", start_timeout_s=10))
    names = ("n1", "n2", "n3")

    def record(name: str) -> Service:
        def started(s: Settings) -> tuple[bool, str]:
            return (s.local.state_dir / name / "ready").exists(), ""

        return Service(
            name=name, process=partial(_voter, name=name, peers=names), probe=started, quorum="q"
        )

    monkeypatch.setattr(platform, "REGISTRY", tuple(record(name) for name in names))
    platform.up(settings, names)
    assert platform.down(settings, names) == ["n3", "n2", "n1"]
    results = [(settings.local.state_dir / name / "result").read_text() for name in names]
    assert results == ["together"] * 3
