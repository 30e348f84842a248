"""The speed job's settings (``WAP_SPEED_JOB__*``): read from the environment, checked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.settings import Settings, SpeedJobSettings


def test_the_section_is_read_from_its_environment_variables(monkeypatch):
    monkeypatch.setenv("WAP_SPEED_JOB__EMR_APPLICATION_ID", "00fspeed123")
    monkeypatch.setenv("WAP_SPEED_JOB__EXECUTOR_CORES", "8")
    monkeypatch.setenv("WAP_SPEED_JOB__MAX_FAILED_ATTEMPTS_PER_HOUR", "3")
    monkeypatch.setenv("WAP_SPEED_JOB__LOG_URI", "s3://lake/logs/spark/speed/")
    job = Settings().speed_job
    assert (job.emr_application_id, job.executor_cores) == ("00fspeed123", 8)
    assert job.max_failed_attempts_per_hour == 3
    assert job.log_uri == "s3://lake/logs/spark/speed/"
    assert Settings().speed.checkpoint_name == "speed"  # WAP_SPEED__* is another section


def test_the_local_defaults_name_no_application():
    job = Settings().speed_job
    assert job.emr_application_id is None and job.log_uri is None
    assert job.name == "speed-layer" and job.max_executors is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_failed_attempts_per_hour": 0}, "greater than or equal to 1"),
        ({"max_failed_attempts_per_hour": 11}, "less than or equal to 10"),
        ({"executor_cores": 3}, "not an EMR Serverless worker size"),
        ({"driver_cores": 32}, "not an EMR Serverless worker size"),
        ({"executor_memory": "16 GB"}, "not a JVM memory size"),
        ({"min_executors": 4, "max_executors": 2}, "min_executors=4 exceeds"),
        ({"shutdown_grace_s": 5}, "greater than or equal to 15"),
        ({"log_uri": "/tmp/logs"}, "must be an s3:// URI"),
        ({"name": "speed layer"}, "should match pattern"),
    ],
)
def test_invalid_values_are_refused_with_the_reason(fields, message):
    with pytest.raises(ValidationError, match=message):
        SpeedJobSettings(**fields)
