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
    from pipelines import DERIVED, PIPELINES
    from platformctl import forget

    asked = []

    def forget_in(settings, spec, user, scope, *, in_process):
        asked.append((spec.name, scope))
        return {"via": "in-process"}, 1 if spec.name == "checkouts" else 0

    def rebuild(settings, spec, *, in_process):
        asked.append((spec.name, "rebuilt"))
        return {"via": "in-process"}, 0

    monkeypatch.setattr(forget, "_forget_in", forget_in)
    monkeypatch.setattr(forget, "_rebuild", rebuild)
    report, code = forget_user(Settings(), "b-1")
    named = [s.name for s in PIPELINES if s.identity]
    # Then every derived pipeline over them, each after its inputs, rebuilds its days.
    reached, derived = set(named), []
    for spec in DERIVED:  # each after its inputs
        if reached & set(spec.input_names):
            derived.append(spec.name)
            reached.add(spec.name)
    assert derived, "a derived pipeline reads a forgotten pipeline"
    assert asked == [(name, "everywhere") for name in named] + [(d, "rebuilt") for d in derived]
    assert set(report["pipelines"]) == {*named, *derived} and "b-1" not in str(report)
    assert report["scope"] == "everywhere"
    assert code == 1  # one pipeline failed: the request did not succeed

    asked.clear()
    report, code = forget_user(Settings(), "b-1", ["checkouts"])
    assert code == 1 and report["scope"] == "pipeline"
    assert asked[0] == ("checkouts", "pipeline")  # the others keep the person's new events
    readers = [d.name for d in DERIVED if "checkouts" in d.input_names]
    assert asked[1:] == [(d, "rebuilt") for d in readers]
