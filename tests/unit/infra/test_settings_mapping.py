"""Environment outputs map one-to-one onto the settings object."""

from __future__ import annotations

import re
import typing

import pytest
from pydantic import SecretStr

from core.settings import Settings
from infra.terraform.settings_env import setting_field, settings_env

# What `terraform output -json` gives for a prod environment (shape and types).
SAMPLE_OUTPUTS = {
    "WAP_ENVIRONMENT": "prod",
    "WAP_KAFKA__BOOTSTRAP_SERVERS": "b-1.wap.kafka.eu-west-1.amazonaws.com:9096,"
    "b-2.wap.kafka.eu-west-1.amazonaws.com:9096",
    "WAP_KAFKA__SECURITY_PROTOCOL": "SASL_SSL",
    "WAP_KAFKA__SASL_MECHANISM": "SCRAM-SHA-512",
    "WAP_KAFKA__SASL_USERNAME": "platform",
    "WAP_KAFKA__EVENTS_TOPIC": "web.events.v1",
    "WAP_KAFKA__DLQ_TOPIC": "web.events.dlq",
    "WAP_KAFKA__PARTITIONS": "12",
    "WAP_KAFKA__REPLICATION_FACTOR": "3",
    "WAP_KAFKA__MIN_INSYNC_REPLICAS": "2",
    "WAP_KAFKA__RETENTION_MS": "604800000",
    "WAP_CASSANDRA__CONTACT_POINTS": '["cassandra.eu-west-1.amazonaws.com"]',
    "WAP_CASSANDRA__PORT": "9142",
    "WAP_CASSANDRA__SSL": "true",
    "WAP_CASSANDRA__KEYSPACE": "web_activity",
    "WAP_CASSANDRA__REPLICATION": '{"class":"SingleRegionStrategy"}',
    "WAP_CASSANDRA__LOCAL_DATACENTER": "eu-west-1",
    "WAP_CASSANDRA__USERNAME": "wap-prod-keyspaces-at-123456789012",
    "WAP_LAKE__ROOT": "s3a://acme-wap-prod-lake/delta",
    "WAP_LAKE__CHECKPOINT_ROOT": "s3a://acme-wap-prod-lake/checkpoints",
    "WAP_SPARK__JARS": '["s3://acme-wap-prod-lake/artifacts/jars/delta-spark_4.1_2.13-4.4.0.jar"]',
    "WAP_SPARK__SHUFFLE_PARTITIONS": "64",
    "WAP_SPARK__EXTRA_CONF": '{"spark.delta.logStore.s3a.impl": '
    '"io.delta.storage.S3DynamoDBLogStore"}',
    "WAP_BATCH__RUNNER": "emr_serverless",
    "WAP_BATCH__EMR_APPLICATION_ID": "00fabc123def4567",
    "WAP_BATCH__EMR_JOB_ROLE_ARN": "arn:aws:iam::123456789012:role/wap-prod-spark-job",
    "WAP_BATCH__ARTIFACTS_URI": "s3://acme-wap-prod-lake/artifacts/0.1.0",
    "WAP_SPEED_JOB__EMR_APPLICATION_ID": "00fspeed456abc789",
}
# Read from Secrets Manager at start-up, never Terraform outputs.
SAMPLE_SECRETS = {
    "WAP_KAFKA__SASL_PASSWORD": "scram-password",
    "WAP_CASSANDRA__PASSWORD": "keyspaces-password",
    "WAP_COLLECTOR__WRITE_KEYS": '{"website": "website-write-key-0001"}',
    "WAP_SERVING__API_TOKENS": '{"analyst": "analyst-read-token-0001"}',
    "WAP_SQL__TOKEN": "sql-token-of-production",
    "WAP_MONITORING__METRICS_TOKEN": "metrics-token-of-production",
}
_SETTINGS_ENV_KEY = re.compile(r"^\s+(WAP_[A-Z_]+)\s+=", re.MULTILINE)


def _setting_outputs(directory, parse_dir, labelled) -> set[str]:
    return {name for name in labelled(parse_dir(directory)["output"]) if name.startswith("WAP_")}


def _platform_map(terraform_root, name: str) -> set[str]:
    """Keys of one map local of the platform module (settings_env, the merge of
    job_settings_env, batch_env and speed_job_env, or secret_env)."""
    text = (terraform_root / "modules" / "platform" / "main.tf").read_text()
    if name == "settings_env":
        parts = ("job_settings_env", "batch_env", "speed_job_env")
        return set().union(*(_platform_map(terraform_root, part) for part in parts))
    body = text.split(f"  {name} = {{", 1)[1].split("\n  }\n", 1)[0]
    return set(_SETTINGS_ENV_KEY.findall(body))


def test_every_setting_output_is_a_field_of_the_settings(env_dirs, parse_dir, labelled):
    for directory in env_dirs:
        outputs = _setting_outputs(directory, parse_dir, labelled)
        assert len(outputs) >= 20
        for name in outputs:
            setting_field(name)


def test_outputs_are_exactly_the_platforms_settings(terraform_root, env_dirs, parse_dir, labelled):
    settings = _platform_map(terraform_root, "settings_env")
    assert settings == set(SAMPLE_OUTPUTS)
    for directory in env_dirs:
        assert _setting_outputs(directory, parse_dir, labelled) == settings


def test_secrets_are_secret_settings_and_never_outputs(
    terraform_root, env_dirs, parse_dir, labelled
):
    secrets = _platform_map(terraform_root, "secret_env")
    assert secrets == set(SAMPLE_SECRETS)
    for name in secrets:
        annotation = setting_field(name).annotation
        assert "SecretStr" in str(annotation) or SecretStr in typing.get_args(annotation), name
    for directory in env_dirs:
        assert secrets.isdisjoint(_setting_outputs(directory, parse_dir, labelled))


def test_structured_settings_are_rendered_as_json(terraform_root):
    text = (terraform_root / "modules" / "platform" / "main.tf").read_text()
    for name in SAMPLE_OUTPUTS:
        annotation = str(setting_field(name).annotation)
        if annotation.startswith(("dict", "tuple", "list")) or "tuple[" in annotation:
            (line,) = [line for line in text.splitlines() if line.strip().startswith(f"{name} ")]
            assert "jsonencode(" in line, name


def test_outputs_load_into_the_settings_object(monkeypatch):
    env = settings_env({name: {"value": value} for name, value in SAMPLE_OUTPUTS.items()})
    for name, value in {**env, **SAMPLE_SECRETS}.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.environment == "prod"
    assert settings.kafka.security_protocol == "SASL_SSL"
    assert settings.kafka.sasl_mechanism == "SCRAM-SHA-512"
    assert (settings.kafka.replication_factor, settings.kafka.min_insync_replicas) == (3, 2)
    assert settings.cassandra.contact_points == ("cassandra.eu-west-1.amazonaws.com",)
    assert (settings.cassandra.port, settings.cassandra.ssl) == (9142, True)
    assert settings.cassandra.replication == {"class": "SingleRegionStrategy"}
    assert settings.lake.root.startswith("s3a://")
    assert settings.spark.jars and settings.spark.extra_conf
    assert settings.speed_job.emr_application_id == "00fspeed456abc789"


def test_non_setting_outputs_are_left_out_and_unknown_settings_refused():
    env = settings_env({"WAP_LAKE__ROOT": {"value": "s3a://b/delta"}, "lake_bucket": "b"})
    assert env == {"WAP_LAKE__ROOT": "s3a://b/delta"}
    with pytest.raises(ValueError, match="no field 'bucket'"):
        settings_env({"WAP_LAKE__BUCKET": "b"})
    with pytest.raises(ValueError, match="no field or section"):
        setting_field("WAP_WAREHOUSE__ROOT")


def test_readme_documents_every_output(terraform_root):
    readme = (terraform_root / "README.md").read_text()
    documented = set(re.findall(r"^\| `(WAP_[A-Z_]+)` \|", readme, re.MULTILINE))
    assert documented == set(SAMPLE_OUTPUTS) | set(SAMPLE_SECRETS)


def test_mwaa_requirements_match_the_local_airflow_pins(terraform_root):
    def pins(text: str) -> dict[str, str]:
        lines = [line.split("#")[0].strip() for line in text.splitlines()]
        return dict(line.split("==") for line in lines if "==" in line)

    mwaa = pins((terraform_root / "modules/airflow/requirements.txt").read_text())
    local = pins((terraform_root.parents[1] / "requirements" / "airflow.in").read_text())
    assert mwaa
    for package, version in mwaa.items():
        assert local.get(package, version) == version, package
