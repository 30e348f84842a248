"""The generated Terraform matches the project's own table and topic definitions."""

from __future__ import annotations

import json

import pytest

from core.settings import AccessSettings, KafkaSettings, SpeedSettings
from infra.terraform.cql import parse_create_table
from infra.terraform.generate import (
    drifted,
    generated_files,
    kafka_sizing,
    keyspaces_tables,
    project_statements,
    topics_document,
)
from ingest.topics import project_topics
from layout import PROGRESS_TABLE, RUNS_TABLE, SPEED_VERSIONS_TABLE, create_statements
from pipelines import PIPELINES


def test_committed_generated_files_are_up_to_date():
    files = generated_files()
    # the Keyspaces tables, the teams' gold readers and one topics file per environment
    assert len(files) == 4
    stale = drifted(files)
    assert stale == [], f"run `python -m infra.terraform.generate`: {stale}"


def test_a_changed_table_definition_is_reported_as_drift(tmp_path, terraform_root):
    committed = terraform_root / "modules" / "cassandra" / "tables.tf.json"
    statements = project_statements()
    # Someone flips a clustering order in the CQL but does not regenerate.
    statements = [s.replace("window_start DESC", "window_start ASC") for s in statements]
    edited = json.dumps({"locals": {"tables": keyspaces_tables(statements)}})
    target = tmp_path / "tables.tf.json"
    target.write_text(committed.read_text())
    assert drifted({target: edited}) == [target]
    assert drifted({target: committed.read_text()}) == []


def test_every_project_table_is_a_keyspaces_table(terraform_root):
    tables = json.loads((terraform_root / "modules/cassandra/tables.tf.json").read_text())
    tables = tables["locals"]["tables"]
    ttl = SpeedSettings().ttl_s
    expected = create_statements("k", ttl, speed=False)
    assert len(tables) == len(expected)
    for statement in expected:
        name = statement.split("k.", 1)[1].split(" ", 1)[0]
        assert name in tables, name
        assert f"{name} (" in statement
        for column in tables[name]["columns"]:
            assert f"{column['name']} {column['type']}" in statement
    # The speed job owns its view tables (versions come and go with replays).
    assert (
        not set(tables)
        - {PROGRESS_TABLE, RUNS_TABLE, SPEED_VERSIONS_TABLE}
        - {n for n in tables if not n.startswith("speed_")}
    )


def test_speed_timeseries_table_keeps_its_keys_order_and_ttl():
    (statement,) = [s for s in create_statements("ks", 3600) if "ks.speed_page_activity (" in s]
    table = parse_create_table(statement)
    assert table.partition_key == ("path", "day")
    assert table.clustering_key == (("window_start", "DESC"),)
    assert table.default_time_to_live == 3600
    assert ("visitors", "blob") in table.columns


def test_inline_primary_key_and_multi_column_clustering():
    single = parse_create_table("CREATE TABLE ks.b (view_name text PRIMARY KEY, n bigint)")
    assert single.partition_key == ("view_name",) and single.clustering_key == ()
    multi = parse_create_table(
        "CREATE TABLE ks.s (v text, day date, version bigint, PRIMARY KEY ((v), day, version)) "
        "WITH CLUSTERING ORDER BY (day DESC)"
    )
    assert multi.clustering_key == (("day", "DESC"), ("version", "ASC"))


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE INDEX i ON ks.t (c)",
        "CREATE TABLE ks.t (a text, b text)",
        "CREATE TABLE ks.t (a text, PRIMARY KEY ((a, missing)))",
        "CREATE TABLE ks.t (a text, b text, PRIMARY KEY (a, b)) WITH CLUSTERING ORDER BY (c DESC)",
    ],
)
def test_statements_that_cannot_be_mapped_are_refused(statement):
    with pytest.raises(ValueError):
        parse_create_table(statement)


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_environment_topics_are_the_projects_topics(terraform_root, env):
    env_dir = terraform_root / "envs" / env
    kafka = kafka_sizing(env_dir / "kafka.auto.tfvars.json")
    generated = json.loads((env_dir / "topics.tf.json").read_text())["locals"]
    topics = generated["platform_topics"]
    specs = project_topics(kafka, PIPELINES, AccessSettings().audit_retention_days)
    assert set(topics) == {spec.name for spec in specs}
    # Every declared pipeline's topic is there: the collector's, and each producer's own.
    assert {p.topic or kafka.events_topic for p in PIPELINES} <= set(topics)
    for spec in specs:
        assert topics[spec.name]["partitions"] == spec.partitions
        assert topics[spec.name]["replication_factor"] == spec.replication_factor
        assert topics[spec.name]["config"] == spec.config
    # Production durability: three replicas, two in sync, days of log to reprocess.
    assert kafka.replication_factor == 3 and kafka.min_insync_replicas == 2
    assert kafka.retention_ms >= 24 * 3600 * 1000
    assert generated["platform_kafka"]["events_topic"] == kafka.events_topic


def test_a_changed_topic_declaration_is_reported_as_drift(terraform_root):
    env_dir = terraform_root / "envs" / "prod"
    committed = (env_dir / "topics.tf.json").read_text()
    kafka = kafka_sizing(env_dir / "kafka.auto.tfvars.json")
    resized = topics_document(kafka.model_copy(update={"partitions": kafka.partitions * 2}))
    assert json.loads(committed)["locals"] != resized


def test_sizing_the_settings_would_refuse_is_refused(tmp_path):
    sizing = tmp_path / "kafka.auto.tfvars.json"
    sizing.write_text(json.dumps({"kafka": {"replication_factor": 2, "min_insync_replicas": 3}}))
    with pytest.raises(ValueError, match="min_insync_replicas"):
        kafka_sizing(sizing)
    sizing.write_text(json.dumps({"kafka": {"replicas": 3}}))
    with pytest.raises(ValueError, match="unknown kafka sizing keys"):
        kafka_sizing(sizing)


def test_generated_topics_document_follows_the_settings():
    document = topics_document(KafkaSettings(partitions=6, replication_factor=3))
    assert document["platform_kafka"]["partitions"] == 6
    assert all(t["partitions"] == 6 for t in document["platform_topics"].values())


def test_each_team_s_lake_policy_opens_the_gold_of_the_pipelines_it_may_read_only():
    from infra.terraform.generate import team_gold_views

    views = team_gold_views()
    assert views["shop-data"] == ["orders_by_currency"]
    assert "orders_by_currency" not in views["marketing"]
    assert set(views["data-platform"]) == {v for p in PIPELINES for v in p.views}
