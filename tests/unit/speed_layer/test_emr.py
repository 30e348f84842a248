"""The speed job's ``StartJobRun`` request: streaming, restarted, sized by the topic."""

from __future__ import annotations

import pytest

from core.settings import (
    BatchSettings,
    KafkaSettings,
    LakeSettings,
    Settings,
    SparkSettings,
    SpeedJobSettings,
    SpeedSettings,
)
from speed_layer.emr import check, max_executors, start_job_run_request
from speed_layer.streams import streamed

ARTIFACTS = "s3://acme-lake/artifacts/0.2.0"


def _settings(**sections) -> Settings:
    defaults = {
        "kafka": KafkaSettings(partitions=12),
        "speed": SpeedSettings(pipelines=[]),  # every live pipeline (tests/conftest.py names one)
        "lake": LakeSettings(checkpoint_root="s3a://acme-lake/checkpoints"),
        "batch": BatchSettings(
            emr_job_role_arn="arn:aws:iam::123456789012:role/wap-prod-spark-job",
            artifacts_uri=ARTIFACTS + "/",
        ),
        "spark": SparkSettings(jars=("s3://acme-lake/artifacts/jars/delta-spark_4.1_2.13.jar",)),
        "speed_job": SpeedJobSettings(
            emr_application_id="00speedapp",
            log_uri="s3://acme-lake/logs/spark/speed/",
        ),
    }
    return Settings(**(defaults | sections))


def _params(request: dict) -> list[str]:
    """``sparkSubmitParameters`` split into its ``--flag value`` pairs."""
    words = request["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"].split()
    return [f"{flag} {value}" for flag, value in zip(words[::2], words[1::2], strict=True)]


def test_the_request_runs_the_speed_layer_as_a_restarted_stream():
    request = start_job_run_request(_settings(), client_token="token-1")
    driver = request.pop("jobDriver")["sparkSubmit"]
    assert request == {
        "applicationId": "00speedapp",
        "clientToken": "token-1",
        "executionRoleArn": "arn:aws:iam::123456789012:role/wap-prod-spark-job",
        "name": "speed-layer",
        "mode": "STREAMING",
        "executionTimeoutMinutes": 0,
        "retryPolicy": {"maxFailedAttemptsPerHour": 5},
        "configurationOverrides": {
            "monitoringConfiguration": {
                "s3MonitoringConfiguration": {"logUri": "s3://acme-lake/logs/spark/speed/"}
            }
        },
    }
    assert driver["entryPoint"] == f"{ARTIFACTS}/speed_entry.py"
    assert driver["entryPointArguments"] == []


def test_the_job_runs_from_the_artifact_on_s3_checkpoints_with_workers_sized_by_settings():
    params = _params(start_job_run_request(_settings(), client_token="t"))
    assert params[0] == f"--jars {ARTIFACTS}/jars/delta-spark_4.1_2.13.jar"
    assert params[1] == f"--conf spark.archives={ARTIFACTS}/pyenv.tar.gz#environment"
    conf = dict(p.removeprefix("--conf ").split("=", 1) for p in params[2:])
    assert conf["spark.emr-serverless.driverEnv.WAP_LAKE__CHECKPOINT_ROOT"] == (
        "s3a://acme-lake/checkpoints"
    )
    assert conf["spark.emr-serverless.driverEnv.WAP_SPEED__CHECKPOINT_NAME"] == "speed"
    assert conf["spark.emr-serverless.driverEnv.WAP_SPEED__STATE_PARTITIONS"] == "1"
    assert conf["spark.executorEnv.PYSPARK_PYTHON"] == "./environment/bin/python"
    sizes = {key: conf[key] for key in conf if key.startswith(("spark.driver.", "spark.exec"))}
    assert sizes == {
        "spark.driver.cores": "2",
        "spark.driver.memory": "8g",
        "spark.executor.cores": "4",
        "spark.executor.memory": "16g",
        "spark.executorEnv.PYSPARK_PYTHON": "./environment/bin/python",
    }
    allocation = {k: v for k, v in conf.items() if k.startswith("spark.dynamicAllocation.")}
    assert allocation == {
        "spark.dynamicAllocation.enabled": "true",
        "spark.dynamicAllocation.minExecutors": "1",
        "spark.dynamicAllocation.initialExecutors": "1",
        # 12 partitions of each streamed pipeline / 4 cores
        "spark.dynamicAllocation.maxExecutors": str(3 * len(streamed(_settings()))),
    }


@pytest.mark.parametrize(
    ("partitions", "state_partitions", "cores", "expected"),
    [(12, 1, 4, 3), (13, 1, 4, 4), (3, 1, 4, 1), (3, 16, 4, 4), (64, 1, 16, 4)],
)
def test_max_executors_give_every_partition_a_task_slot(
    partitions, state_partitions, cores, expected
):
    settings = _settings(
        kafka=KafkaSettings(partitions=partitions),
        speed=SpeedSettings(state_partitions=state_partitions, pipelines=["web_events"]),
        speed_job=SpeedJobSettings(emr_application_id="00speedapp", executor_cores=cores),
    )
    assert max_executors(settings) == expected


def test_every_streamed_pipeline_gets_its_partitions_task_slots():
    """Finding 11 of the pipelines' isolation: the job was sized from one pipeline's
    partitions while every streamed pipeline's query reads its own at the same time."""
    settings = _settings(
        kafka=KafkaSettings(partitions=12),
        speed_job=SpeedJobSettings(emr_application_id="00speedapp", executor_cores=4),
    )
    pipelines = streamed(settings)
    assert len(pipelines) >= 2
    slots = sum(spec.partitions_of(settings) for spec in pipelines)
    assert max_executors(settings) == -(-slots // 4) > 3  # 3: one pipeline's 12 partitions


def test_a_set_maximum_wins_and_the_minimum_is_kept():
    fixed = SpeedJobSettings(emr_application_id="a", min_executors=2, max_executors=6)
    assert max_executors(_settings(speed_job=fixed)) == 6
    quiet = SpeedJobSettings(emr_application_id="a", min_executors=5)
    assert max_executors(_settings(kafka=KafkaSettings(partitions=3), speed_job=quiet)) == 5


def test_the_named_pipelines_and_retry_policy_follow_the_settings():
    settings = _settings(
        speed=SpeedSettings(pipelines=["web_events", "checkouts"], checkpoint_name="speed-v2"),
        speed_job=SpeedJobSettings(
            emr_application_id="00speedapp", name="speed-v2", max_failed_attempts_per_hour=10
        ),
    )
    request = start_job_run_request(settings, client_token="t")
    assert request["name"] == "speed-v2"
    assert request["retryPolicy"] == {"maxFailedAttemptsPerHour": 10}
    assert "configurationOverrides" not in request  # the application's log location
    arguments = request["jobDriver"]["sparkSubmit"]["entryPointArguments"]
    assert arguments == ["--pipeline", "web_events", "--pipeline", "checkouts"]
    assert "--conf spark.emr-serverless.driverEnv.WAP_SPEED__CHECKPOINT_NAME=speed-v2" in (
        _params(request)
    )


def test_missing_settings_are_named_all_at_once():
    with pytest.raises(ValueError) as refused:
        check(Settings())  # the local defaults: nothing of AWS, checkpoints on this disk
    message = str(refused.value)
    for name in (
        "WAP_SPEED_JOB__EMR_APPLICATION_ID",
        "WAP_BATCH__EMR_JOB_ROLE_ARN",
        "WAP_BATCH__ARTIFACTS_URI",
        "WAP_LAKE__CHECKPOINT_ROOT=s3a://",
    ):
        assert name in message, name


@pytest.mark.parametrize(
    ("section", "value", "named"),
    [
        ("speed_job", SpeedJobSettings(), "WAP_SPEED_JOB__EMR_APPLICATION_ID"),
        ("batch", BatchSettings(emr_job_role_arn="arn:aws:iam::1:role/r"), "ARTIFACTS_URI"),
        ("batch", BatchSettings(artifacts_uri=ARTIFACTS), "WAP_BATCH__EMR_JOB_ROLE_ARN"),
        ("lake", LakeSettings(checkpoint_root="/var/lib/checkpoints"), "not on S3"),
    ],
)
def test_each_missing_setting_refuses_the_request(section, value, named):
    with pytest.raises(ValueError, match=named) as refused:
        start_job_run_request(_settings(**{section: value}), client_token="t")
    assert str(refused.value).count(";") == 0  # only what is missing
