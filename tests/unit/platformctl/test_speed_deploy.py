"""``speed-deploy`` / ``speed-status`` against EMR Serverless, checked request by request.

A real boto3 ``emr-serverless`` client with fake credentials behind botocore's
``Stubber``: every call the code makes must be the next one queued here, with
exactly these parameters (validated against the service model too), and a call
nobody queued fails the test; nothing leaves the machine.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import ANY, Stubber

from core.settings import (
    BatchSettings,
    KafkaSettings,
    LakeSettings,
    Settings,
    SparkSettings,
    SpeedJobSettings,
    SpeedSettings,
)
from pipelines import PIPELINES
from platformctl.cli import main
from platformctl.speed_deploy import DeployError, deploy, status

APP = "00fspeedapp0001"
ROLE = "arn:aws:iam::123456789012:role/wap-prod-spark-job"
ARTIFACTS = "s3://acme-wap-prod-lake/artifacts/0.3.0"
T0 = datetime(2026, 11, 27, 8, 0, tzinfo=UTC)
RUNS_ARN = f"arn:aws:emr-serverless:eu-west-1:123456789012:/applications/{APP}/jobruns"

LIVE = [spec for spec in PIPELINES if spec.speed.live]
"""The pipelines the job streams: each gets its 12 partitions' task slots (3 executors of 4)."""

# What StartJobRun must receive for the settings of _settings(), written out in full.
EXPECTED_START = {
    "applicationId": APP,
    "clientToken": "token-1",
    "executionRoleArn": ROLE,
    "name": "speed-layer",
    "mode": "STREAMING",
    "executionTimeoutMinutes": 0,
    "retryPolicy": {"maxFailedAttemptsPerHour": 5},
    "jobDriver": {
        "sparkSubmit": {
            "entryPoint": f"{ARTIFACTS}/speed_entry.py",
            "entryPointArguments": [],
            "sparkSubmitParameters": " ".join(
                [
                    f"--jars {ARTIFACTS}/jars/spark-sql-kafka-0-10_2.13-4.1.3.jar",
                    f"--conf spark.archives={ARTIFACTS}/pyenv.tar.gz#environment",
                    "--conf spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON="
                    "./environment/bin/python",
                    "--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON=./environment/bin/python",
                    "--conf spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python",
                    "--conf spark.driver.cores=2",
                    "--conf spark.driver.memory=8g",
                    "--conf spark.executor.cores=4",
                    "--conf spark.executor.memory=16g",
                    "--conf spark.dynamicAllocation.enabled=true",
                    "--conf spark.dynamicAllocation.minExecutors=1",
                    "--conf spark.dynamicAllocation.initialExecutors=1",
                    f"--conf spark.dynamicAllocation.maxExecutors={3 * len(LIVE)}",
                    "--conf spark.emr-serverless.driverEnv.WAP_LAKE__CHECKPOINT_ROOT="
                    "s3a://acme-wap-prod-lake/checkpoints",
                    "--conf spark.emr-serverless.driverEnv.WAP_SPEED__CHECKPOINT_NAME=speed",
                    "--conf spark.emr-serverless.driverEnv.WAP_SPEED__STATE_PARTITIONS=12",
                ]
            ),
        }
    },
    "configurationOverrides": {
        "monitoringConfiguration": {
            "s3MonitoringConfiguration": {"logUri": "s3://acme-wap-prod-lake/logs/spark/speed/"}
        }
    },
}


def _settings(**speed_job) -> Settings:
    return Settings(
        kafka=KafkaSettings(partitions=12),
        speed=SpeedSettings(pipelines=[], state_partitions=12),
        lake=LakeSettings(checkpoint_root="s3a://acme-wap-prod-lake/checkpoints"),
        batch=BatchSettings(emr_job_role_arn=ROLE, artifacts_uri=ARTIFACTS),
        spark=SparkSettings(jars=("/opt/jars/spark-sql-kafka-0-10_2.13-4.1.3.jar",)),
        speed_job=SpeedJobSettings(
            emr_application_id=APP,
            log_uri="s3://acme-wap-prod-lake/logs/spark/speed/",
            poll_s=5,
            stop_timeout_s=60,
            **speed_job,
        ),
    )


@pytest.fixture
def emr():
    """A real emr-serverless client (fake credentials) and its Stubber, activated; at the
    end every queued response must have been asked for."""
    client = boto3.client(
        "emr-serverless",
        region_name="eu-west-1",
        aws_access_key_id="AKIDTESTING",
        aws_secret_access_key="testing-secret",
    )
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


class Clock:
    """Time that moves only when the code sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _summary(run_id: str, state: str, *, name: str = "speed-layer", age_h: int = 1) -> dict:
    created = T0 - timedelta(hours=age_h)
    return {
        "applicationId": APP,
        "id": run_id,
        "name": name,
        "mode": "STREAMING",
        "arn": f"{RUNS_ARN}/{run_id}",
        "createdBy": "arn:aws:iam::123456789012:role/deployer",
        "createdAt": created,
        "updatedAt": created,
        "executionRole": ROLE,
        "state": state,
        "stateDetails": f"the run is {state}",
        "releaseLabel": "emr-spark-8.0.0",
        "attempt": 2,
        "attemptCreatedAt": created + timedelta(minutes=30),
    }


def _job_run(run_id: str, state: str, **extra) -> dict:
    summary = _summary(run_id, state)
    job = {key: summary[key] for key in ("applicationId", "arn", "createdBy", "createdAt")}
    job |= {key: summary[key] for key in ("updatedAt", "executionRole", "state", "stateDetails")}
    job |= {"jobRunId": run_id, "releaseLabel": "emr-spark-8.0.0", "mode": "STREAMING"}
    job["jobDriver"] = {"sparkSubmit": {"entryPoint": f"{ARTIFACTS}/speed_entry.py"}}
    return {"jobRun": job | extra}


def _expect_list(stubber: Stubber, *runs: dict, next_token: str | None = None, token=None):
    params = {"applicationId": APP, "mode": "STREAMING"}
    response: dict = {"jobRuns": list(runs)}
    if next_token:
        response["nextToken"] = next_token
    if token:
        params["nextToken"] = token
    stubber.add_response("list_job_runs", response, params)


def _expect_cancel(stubber: Stubber, run_id: str, grace: int = 120) -> None:
    stubber.add_response(
        "cancel_job_run",
        {"applicationId": APP, "jobRunId": run_id},
        {"applicationId": APP, "jobRunId": run_id, "shutdownGracePeriodInSeconds": grace},
    )


def _expect_state(stubber: Stubber, run_id: str, state: str) -> None:
    stubber.add_response(
        "get_job_run", _job_run(run_id, state), {"applicationId": APP, "jobRunId": run_id}
    )


def _expect_start(stubber: Stubber, run_id: str = "newrun0001", request=None) -> None:
    response = {"applicationId": APP, "jobRunId": run_id, "arn": f"{RUNS_ARN}/{run_id}"}
    stubber.add_response("start_job_run", response, request or EXPECTED_START)


def test_with_no_run_one_is_started_with_the_exact_request(emr):
    client, stubber = emr
    # Another stream on the application is not the speed job.
    _expect_list(stubber, _summary("otherjob01", "RUNNING", name="sessions-stream"))
    _expect_start(stubber)

    report = deploy(client, _settings(), client_token="token-1")

    assert report["action"] == "started"
    assert report["run"] == {"id": "newrun0001", "state": "SUBMITTED"}
    assert report["ended"] == [] and report["previous"] == []


def test_a_running_run_is_kept_and_none_is_started(emr):
    client, stubber = emr
    _expect_list(stubber, _summary("liverun001", "RUNNING"), _summary("oldrun0001", "CANCELLED"))

    report = deploy(client, _settings(), client_token="token-1")  # no start queued: none made

    assert report["action"] == "kept"
    assert (report["run"]["id"], report["run"]["state"]) == ("liverun001", "RUNNING")
    assert report["run"]["attempt"] == 2


def test_replace_cancels_waits_until_cancelled_then_starts_on_the_same_checkpoint(emr):
    client, stubber = emr
    clock = Clock()
    _expect_list(stubber, _summary("liverun001", "RUNNING"))
    _expect_cancel(stubber, "liverun001")
    _expect_state(stubber, "liverun001", "CANCELLING")
    _expect_state(stubber, "liverun001", "CANCELLING")
    _expect_state(stubber, "liverun001", "CANCELLED")
    _expect_start(stubber)  # queued last: a start before CANCELLED fails the test

    report = deploy(
        client, _settings(), replace=True, client_token="token-1", sleep=clock.sleep, clock=clock
    )

    assert clock.sleeps == [5, 5]  # speed_job.poll_s, while the old run was CANCELLING
    assert report["action"] == "replaced"
    assert [(r["id"], r["state"]) for r in report["ended"]] == [("liverun001", "CANCELLED")]
    assert report["run"]["id"] == "newrun0001"


@pytest.mark.parametrize("replace", [False, True])
def test_a_run_that_failed_is_followed_by_a_new_one_without_a_cancel(emr, replace):
    client, stubber = emr
    failed = _summary("failrun001", "FAILED") | {"stateDetails": "Job failed, 5 attempts in 1h"}
    _expect_list(stubber, _summary("oldrun0001", "CANCELLED", age_h=48), failed)
    _expect_start(stubber)  # no cancel_job_run or get_job_run queued: a failed run has ended

    report = deploy(client, _settings(), replace=replace, client_token="token-1")

    assert report["action"] == "started"
    assert [(r["id"], r["state"]) for r in report["previous"]] == [("failrun001", "FAILED")]
    assert report["previous"][0]["state_details"] == "Job failed, 5 attempts in 1h"


def test_a_replaced_run_that_fails_while_stopping_is_still_replaced(emr):
    client, stubber = emr
    clock = Clock()
    _expect_list(stubber, _summary("liverun001", "RUNNING"))
    _expect_cancel(stubber, "liverun001", grace=300)
    _expect_state(stubber, "liverun001", "FAILED")
    request = EXPECTED_START | {"retryPolicy": {"maxFailedAttemptsPerHour": 2}}
    _expect_start(stubber, request=request)

    report = deploy(
        client,
        _settings(shutdown_grace_s=300, max_failed_attempts_per_hour=2),
        replace=True,
        client_token="token-1",
        sleep=clock.sleep,
        clock=clock,
    )

    assert clock.sleeps == []
    assert report["ended"][0]["state"] == "FAILED" and report["action"] == "replaced"


def test_a_run_still_cancelling_is_waited_for_before_the_start(emr):
    client, stubber = emr
    clock = Clock()
    _expect_list(stubber, _summary("stopping01", "CANCELLING"))
    _expect_state(stubber, "stopping01", "CANCELLING")
    _expect_state(stubber, "stopping01", "CANCELLED")
    _expect_start(stubber)

    report = deploy(client, _settings(), client_token="token-1", sleep=clock.sleep, clock=clock)

    assert report["action"] == "started" and clock.sleeps == [5]
    assert report["ended"][0]["id"] == "stopping01"


def test_an_old_run_that_does_not_end_in_time_stops_the_deploy_before_any_start(emr):
    client, stubber = emr
    clock = Clock()
    _expect_list(stubber, _summary("stuckrun01", "RUNNING"))
    _expect_cancel(stubber, "stuckrun01")
    for _ in range(13):  # at 0, 5, ..., 60 s: still cancelling at the 60 s deadline
        _expect_state(stubber, "stuckrun01", "CANCELLING")

    with pytest.raises(DeployError, match="stuckrun01 is still CANCELLING after 60s"):
        deploy(client, _settings(), replace=True, client_token="t", sleep=clock.sleep, clock=clock)
    assert clock.now == 60


def test_two_live_runs_are_refused_and_replace_ends_both(emr):
    client, stubber = emr
    runs = (_summary("liverun001", "RUNNING"), _summary("liverun002", "PENDING", age_h=0))
    _expect_list(stubber, *runs)
    with pytest.raises(DeployError, match="2 runs of speed-layer are live"):
        deploy(client, _settings(), client_token="token-1")

    _expect_list(stubber, *runs)
    _expect_cancel(stubber, "liverun002")  # newest first
    _expect_cancel(stubber, "liverun001")
    _expect_state(stubber, "liverun002", "CANCELLED")
    _expect_state(stubber, "liverun001", "CANCELLED")
    _expect_start(stubber)
    report = deploy(client, _settings(), replace=True, client_token="token-1")
    assert [r["id"] for r in report["ended"]] == ["liverun002", "liverun001"]


def test_every_page_of_runs_is_read(emr):
    client, stubber = emr
    _expect_list(stubber, _summary("oldrun0001", "CANCELLED", age_h=9), next_token="page-2")
    _expect_list(stubber, _summary("liverun001", "RUNNING"), token="page-2")

    report = deploy(client, _settings(), client_token="token-1")

    assert report["action"] == "kept" and report["run"]["id"] == "liverun001"


@pytest.mark.parametrize(
    ("section", "value", "named"),
    [
        ("speed_job", SpeedJobSettings(), "WAP_SPEED_JOB__EMR_APPLICATION_ID"),
        ("batch", BatchSettings(emr_job_role_arn=ROLE), "WAP_BATCH__ARTIFACTS_URI"),
        ("lake", LakeSettings(checkpoint_root="/var/lib/wap/checkpoints"), "not on S3"),
    ],
)
def test_missing_settings_refuse_before_any_aws_call(emr, section, value, named):
    client, _stubber = emr  # nothing queued: any AWS call would fail the test
    settings = _settings().model_copy(update={section: value})
    with pytest.raises(ValueError, match=named):
        deploy(client, settings, replace=True)


def test_status_names_the_live_run_its_attempt_and_when_it_started(emr):
    client, stubber = emr
    _expect_list(stubber, _summary("liverun001", "RUNNING"), _summary("old", "FAILED", age_h=5))
    started = T0 - timedelta(minutes=50)
    stubber.add_response(
        "get_job_run",
        _job_run("liverun001", "RUNNING", attempt=2, startedAt=started, attemptCreatedAt=T0),
        {"applicationId": APP, "jobRunId": "liverun001"},
    )

    report = status(client, _settings())

    assert report["live_runs"] == ["liverun001"]
    assert report["run"] == {
        "id": "liverun001",
        "state": "RUNNING",
        "state_details": "the run is RUNNING",
        "attempt": 2,
        "created_at": "2026-11-27T07:00:00+00:00",
        "started_at": "2026-11-27T07:10:00+00:00",
        "attempt_started_at": "2026-11-27T08:00:00+00:00",
        "ended_at": None,
    }


def test_the_command_refuses_without_settings_and_reports_the_stubbed_run(emr, monkeypatch, capsys):
    assert main(["speed-deploy"]) == 2  # the local defaults: no application, no AWS call
    assert "WAP_SPEED_JOB__EMR_APPLICATION_ID" in json.loads(capsys.readouterr().out)["refused"]

    client, stubber = emr
    monkeypatch.setattr("platformctl.speed_deploy.emr_client", lambda: client)
    monkeypatch.setenv("WAP_SPEED_JOB__EMR_APPLICATION_ID", APP)
    _expect_list(stubber, _summary("oldrun0001", "FAILED"))
    _expect_state(stubber, "oldrun0001", "FAILED")
    assert main(["speed-status"]) == 3  # no run is RUNNING
    report = json.loads(capsys.readouterr().out)
    assert (report["run"]["id"], report["run"]["state"]) == ("oldrun0001", "FAILED")


def test_deploys_that_see_the_same_runs_send_the_same_start_token(emr):
    """Two deploys racing on the same view of the runs start one run: EMR Serverless starts
    one for one clientToken. A view with another run in it gives another token."""
    client, stubber = emr
    tokens: list[str] = []
    client.meta.events.register(
        "before-parameter-build.emr-serverless.StartJobRun",
        lambda params, **_: tokens.append(params["clientToken"]),
    )
    ended = _summary("failrun001", "FAILED")
    for listing in ([ended], [ended], [ended, _summary("failrun002", "FAILED", age_h=0)]):
        _expect_list(stubber, *listing)
        _expect_start(stubber, request=EXPECTED_START | {"clientToken": ANY})
        deploy(client, _settings())

    assert tokens[0] == tokens[1] != tokens[2]
    assert all(len(token) <= 64 and token.isalnum() for token in tokens)  # StartJobRun's limits
