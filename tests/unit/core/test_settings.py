from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.settings import KafkaSettings, Settings


def test_local_defaults_work_out_of_the_box(monkeypatch):
    for key in list(__import__("os").environ):
        if key.startswith("WAP_"):
            monkeypatch.delenv(key)
    settings = Settings()
    assert settings.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert settings.cassandra.contact_points == ("127.0.0.1",)
    assert settings.spark.master == "local[2]"
    assert settings.local.state_dir.name == ".platform"


def test_environment_overrides_nested_fields(monkeypatch):
    monkeypatch.setenv("WAP_KAFKA__BOOTSTRAP_SERVERS", "b1:9098,b2:9098")
    monkeypatch.setenv("WAP_KAFKA__REPLICATION_FACTOR", "3")
    monkeypatch.setenv("WAP_KAFKA__MIN_INSYNC_REPLICAS", "2")
    monkeypatch.setenv("WAP_CASSANDRA__CONTACT_POINTS", '["c1", "c2"]')
    monkeypatch.setenv("WAP_SPARK__MASTER", "spark://m:7077")
    monkeypatch.setenv("WAP_LAKE__ROOT", "s3a://lake/delta")
    settings = Settings()
    assert settings.kafka.bootstrap_servers == "b1:9098,b2:9098"
    assert settings.kafka.min_insync_replicas == 2
    assert settings.cassandra.contact_points == ("c1", "c2")
    assert settings.spark.master == "spark://m:7077"
    assert settings.lake.root == "s3a://lake/delta"


def test_settings_are_frozen():
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.environment = "prod"  # type: ignore[misc]


def test_unknown_field_is_refused():
    with pytest.raises(ValidationError, match="extra"):
        KafkaSettings(bootstrap_server="typo:9092")  # type: ignore[call-arg]


def test_min_insync_above_replication_is_refused_with_a_hint():
    with pytest.raises(ValidationError, match="could never write"):
        KafkaSettings(replication_factor=1, min_insync_replicas=2)


def test_sasl_without_credentials_is_refused():
    with pytest.raises(ValidationError, match="WAP_KAFKA__SASL_PASSWORD"):
        KafkaSettings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512")


def test_secrets_are_not_printed():
    kafka = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="svc",
        sasl_password="hunter2",
    )
    assert "hunter2" not in repr(kafka)
    assert kafka.client_config()["sasl.password"] == "hunter2"


def test_spark_kafka_options_carry_the_same_client_settings():
    kafka = KafkaSettings(
        bootstrap_servers="b1:9096",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="svc",
        sasl_password="s3cret",
    )
    options = kafka.spark_options()
    assert options["kafka.bootstrap.servers"] == "b1:9096"
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="svc" password="s3cret";'
    )
    assert set(KafkaSettings().spark_options()) == {
        "kafka.bootstrap.servers",
        "kafka.security.protocol",
    }


@pytest.mark.parametrize(
    ("user", "password"),
    [("svc", 's3"cret'), ("svc\\eu", "back\\slash\\"), ('we"ird', '\\"both\\"')],
)
def test_sasl_credentials_survive_the_jaas_line(spark, user, password):
    """Kafka's own JAAS parser reads back exactly the configured credentials."""
    kafka = KafkaSettings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user,
        sasl_password=password,
    )
    line = kafka.spark_options()["kafka.sasl.jaas.config"]
    jaas = spark._jvm.org.apache.kafka.common.security.JaasConfig("KafkaClient", line)
    (entry,) = jaas.getAppConfigurationEntry("KafkaClient")
    options = entry.getOptions()
    assert (options.get("username"), options.get("password")) == (user, password)


def test_the_sql_server_url_carries_the_token_and_a_local_host(monkeypatch):
    from core.settings import SqlSettings

    monkeypatch.setenv("WAP_SQL__TOKEN", "s3cret-of-this-test")
    monkeypatch.setenv("WAP_SQL__PORT", "16002")
    sql = Settings().sql
    assert sql.url() == "sc://localhost:16002/;token=s3cret-of-this-test"
    assert "s3cret" not in repr(sql)
    # Any other host name: the client speaks TLS to it (docs/sql.md).
    assert (
        SqlSettings(host="sql.example.com", token="t" * 16)
        .url()
        .startswith("sc://sql.example.com:")
    )


def test_production_refuses_the_local_sql_and_metrics_tokens():
    from core.settings import CollectorSettings, MonitoringSettings, ServingSettings, SqlSettings

    collector = CollectorSettings(write_keys={"site": "k" * 32}, allowed_origins={"site": []})
    serving = ServingSettings(api_tokens={"analyst": "prod-analyst-token-0001"})
    with pytest.raises(ValidationError, match="WAP_SQL__TOKEN"):
        Settings(environment="prod", collector=collector, serving=serving)
    sql = SqlSettings(token="x" * 24)
    with pytest.raises(ValidationError, match="WAP_MONITORING__METRICS_TOKEN"):
        Settings(environment="prod", collector=collector, serving=serving, sql=sql)
    monitoring = MonitoringSettings(metrics_token="m" * 24)
    assert Settings(
        environment="prod", collector=collector, serving=serving, sql=sql, monitoring=monitoring
    )


def _without_wap_variables(monkeypatch) -> None:
    for key in list(__import__("os").environ):
        if key.startswith("WAP_"):
            monkeypatch.delenv(key)


def test_a_local_cassandra_ring_gives_the_apps_its_three_nodes_and_three_replicas(monkeypatch):
    from core.settings import RING_ADDRESSES, settings_env

    _without_wap_variables(monkeypatch)
    monkeypatch.setenv("WAP_LOCAL__CASSANDRA_NODES", "3")
    monkeypatch.setenv("WAP_CASSANDRA__KEYSPACE", "ring")
    settings = Settings()
    assert settings.cassandra.contact_points == RING_ADDRESSES
    assert settings.cassandra.replication == {"class": "SimpleStrategy", "replication_factor": 3}
    assert settings.cassandra.keyspace == "ring"
    assert settings.local.cassandra_heap_mb == 1024  # each node's
    # A process started with these settings (the speed job, serving) gets the same.
    for key, value in settings_env(settings).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("WAP_LOCAL__CASSANDRA_NODES")
    monkeypatch.delenv("WAP_CASSANDRA__KEYSPACE")
    assert Settings() == settings


def test_one_node_keeps_the_single_node_defaults(monkeypatch):
    _without_wap_variables(monkeypatch)
    settings = Settings()
    assert settings.local.cassandra_nodes == 1
    assert settings.cassandra.contact_points == ("127.0.0.1",)
    assert settings.cassandra.replication == {"class": "SimpleStrategy", "replication_factor": 1}
    assert settings.local.cassandra_heap_mb == 2048


def test_a_ring_keeps_what_is_set(monkeypatch):
    from core.settings import CassandraSettings, LocalSettings

    _without_wap_variables(monkeypatch)
    replication = {"class": "NetworkTopologyStrategy", "datacenter1": 2}
    settings = Settings(
        local=LocalSettings(cassandra_nodes=3, cassandra_heap_mb=2048),
        cassandra=CassandraSettings(contact_points=("127.0.0.2",), replication=replication),
    )
    assert settings.cassandra.contact_points == ("127.0.0.2",)
    assert settings.cassandra.replication == replication
    assert settings.local.cassandra_heap_mb == 2048
    addresses = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    ring = Settings(local=LocalSettings(cassandra_nodes=3, cassandra_ring_addresses=addresses))
    assert ring.cassandra.contact_points == addresses


@pytest.mark.parametrize(
    ("local", "message"),
    [
        ({"cassandra_nodes": 2}, "runs 1 Cassandra node or a ring of 3"),
        (
            {"cassandra_ring_addresses": ("127.0.0.1", "localhost", "127.0.0.3")},
            "'localhost' is not an IPv4 address",
        ),
        (
            {"cassandra_ring_addresses": ("127.0.0.1", "127.0.0.1", "127.0.0.3")},
            "repeats an address",
        ),
    ],
)
def test_a_ring_that_cannot_run_is_refused_with_a_hint(local, message):
    from core.settings import LocalSettings

    with pytest.raises(ValidationError, match=message):
        LocalSettings(**local)
