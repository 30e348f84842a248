"""``platformctl forget``: its command line and the choice between Airflow and in-process."""

from __future__ import annotations

import pytest

from core.settings import AirflowSettings, Settings
from platformctl.cli import main
from platformctl.forget import airflow_ready, forget_user
from tests.support.ports import free_port

_unused_port = free_port


def test_the_user_is_required(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["forget"])
    assert exited.value.code == 2
    assert "--user" in capsys.readouterr().err


def test_an_empty_user_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="userId or an anonymousId"):
        forget_user(Settings(), "  ", "web_events")


def test_an_unknown_pipeline_is_refused():
    with pytest.raises(KeyError, match="No pipeline 'nope'"):
        forget_user(Settings(), "u-1", "nope")


def test_without_an_answering_airflow_the_steps_run_in_process():
    settings = Settings(airflow=AirflowSettings(api_port=_unused_port()))
    assert not airflow_ready(settings)
