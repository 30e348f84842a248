"""``platformctl forget``: its command line and the choice between Airflow and in-process."""

from __future__ import annotations

import pytest

from core.settings import AirflowSettings, Settings
from platformctl.cli import main
from platformctl.forget import airflow_ready, forget_user
from tests.support.ports import free_port


def test_the_user_is_required(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["forget"])
    assert exited.value.code == 2
    assert "--user" in capsys.readouterr().err


def test_an_empty_user_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="must name a person's id"):
        forget_user(Settings(), "  ", ["web_events"])


def test_an_unknown_pipeline_is_refused():
    with pytest.raises(KeyError, match="No pipeline 'nope'"):
        forget_user(Settings(), "u-1", ["nope"])


def test_without_an_answering_airflow_the_steps_run_in_process():
    settings = Settings(airflow=AirflowSettings(api_port=free_port()))
    assert not airflow_ready(settings)


def test_one_request_forgets_in_every_pipeline_that_names_a_person(monkeypatch):
    from pipelines import PIPELINES
    from platformctl import forget

    asked = []

    def forget_in(settings, spec, user, scope, *, in_process):
        asked.append((spec.name, scope))
        return {"via": "in-process"}, 1 if spec.name == "checkouts" else 0

    monkeypatch.setattr(forget, "_forget_in", forget_in)
    report, code = forget_user(Settings(), "b-1")
    named = [s.name for s in PIPELINES if s.identity]
    assert asked == [(name, "everywhere") for name in named]
    assert set(report["pipelines"]) == set(named) and "b-1" not in str(report)
    assert report["scope"] == "everywhere"
    assert code == 1  # one pipeline failed: the request did not succeed

    asked.clear()
    report, code = forget_user(Settings(), "b-1", ["web_events"])
    assert code == 0 and report["scope"] == "pipeline"
    assert asked == [("web_events", "pipeline")]  # the others keep the person's new events
