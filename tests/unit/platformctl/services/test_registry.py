"""The registry of local services: one complete record per service, in dependency order."""

from __future__ import annotations

from core.settings import AirflowSettings, LocalSettings, Settings
from platformctl.process import ManagedProcess
from platformctl.services import REGISTRY, Service

NAMES = [service.name for service in REGISTRY]


def _settings(tmp_path) -> Settings:
    return Settings(
        local=LocalSettings(state_dir=tmp_path / "state"),
        airflow=AirflowSettings(home=tmp_path / "airflow", api_port=18080),
    )


def test_every_service_is_a_record_with_a_process_builder_and_a_probe(tmp_path):
    settings = _settings(tmp_path)
    assert NAMES == [
        "kafka",
        "kafka-2",
        "kafka-3",
        "cassandra",
        "cassandra-2",
        "cassandra-3",
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
        "collector",
        "speed",
        "sql",
        "serving",
        "batch",
        "prometheus",
        "airflow-api-server",
        "airflow-dag-processor",
        "airflow-scheduler",
    ]
    for service in REGISTRY:
        assert isinstance(service, Service)
        assert callable(service.probe), service.name
        process = service.process(settings)
        assert isinstance(process, ManagedProcess)
        # The record's name is the process's: pid file, log file and ``down`` all use it.
        assert process.name == service.name
        assert process.pid_file == tmp_path / "state" / "run" / f"{service.name}.pid"
        assert process.log_file.parent == tmp_path / "state" / "logs"
        assert process.marker and process.argv


def test_names_and_pid_files_are_unique(tmp_path):
    settings = _settings(tmp_path)
    assert len(set(NAMES)) == len(NAMES)
    pid_files = [service.process(settings).pid_file for service in REGISTRY]
    assert len(set(pid_files)) == len(pid_files)


def test_every_service_comes_after_the_services_it_requires():
    for position, service in enumerate(REGISTRY):
        for required in service.requires:
            assert required in NAMES[:position], f"{service.name} starts before {required}"
    # The topics and the keyspace exist before anything produces or writes.
    for name in ("collector", "speed", "sql", "serving", "batch"):
        assert NAMES.index("kafka-3") < NAMES.index(name)
        assert NAMES.index("cassandra") < NAMES.index(name)
    assert {"kafka", "cassandra"} <= set(REGISTRY[NAMES.index("speed")].requires)
    # The DAGs' tasks submit their steps to the batch step server: it is up before Airflow.
    assert NAMES.index("batch") < NAMES.index("airflow-scheduler")


def test_the_steps_of_up_are_where_the_services_need_them():
    by_name = {service.name: service for service in REGISTRY}
    # Jars for the JVM services (once for the Kafka nodes), one venv for the three Airflow
    # components.
    assert by_name["kafka"].install is not None and by_name["cassandra"].install is not None
    assert len({by_name[name].install for name in ("kafka", "kafka-2", "kafka-3")}) == 1
    airflow = [service for service in REGISTRY if service.name.startswith("airflow-")]
    assert len({service.install for service in airflow}) == 1
    assert airflow[0].install is not None
    # Kafka's storage is formatted and Airflow's metadata DB migrated before a first start.
    assert all(by_name[name].prepare is not None for name in ("kafka", "kafka-2", "kafka-3"))
    assert all(service.prepare is not None for service in airflow)
    # Topics, keyspace and pools once healthy; the pools once, through the api-server.
    assert by_name["kafka"].provision is not None and by_name["cassandra"].provision is not None
    assert [s.name for s in airflow if s.provision is not None] == ["airflow-api-server"]
    assert all(by_name[name].install is None for name in ("collector", "speed", "serving"))
    # The SQL server's read-only guard is compiled into its jar before it starts.
    assert by_name["sql"].install is not None


def test_the_second_and_third_kafka_nodes_run_only_in_a_three_node_cluster(tmp_path):
    one = _settings(tmp_path)
    three = one.model_copy(
        update={"local": LocalSettings(state_dir=one.local.state_dir, kafka_nodes=3)}
    )
    by_name = {service.name: service for service in REGISTRY}
    kafka = [name for name in NAMES if name.startswith("kafka")]
    assert [name for name in kafka if not by_name[name].runs_with(one)] == ["kafka-2", "kafka-3"]
    assert all(by_name[name].runs_with(three) for name in kafka)
    # A node of a cluster cannot be healthy alone: up waits for less before the next node.
    assert all(by_name[name].ready is not None for name in ("kafka", "kafka-2", "kafka-3"))


def test_only_the_ring_setting_runs_the_second_and_third_cassandra_nodes(tmp_path):
    single = _settings(tmp_path)
    ring = Settings(local=LocalSettings(state_dir=tmp_path / "state", cassandra_nodes=3))
    by_name = {service.name: service for service in REGISTRY}
    cassandra = [name for name in NAMES if name.startswith("cassandra")]
    alone = [name for name in cassandra if not by_name[name].runs_with(single)]
    assert alone == ["cassandra-2", "cassandra-3"]
    assert all(by_name[name].runs_with(ring) for name in cassandra)
    # Each node joins once the one before is up and normal.
    assert by_name["cassandra-2"].requires == ("cassandra",)
    assert by_name["cassandra-3"].requires == ("cassandra",)  # joins with cassandra-2
    # The jars once for the whole ring.
    assert len({by_name[name].install for name in ("cassandra", "cassandra-2", "cassandra-3")}) == 1
