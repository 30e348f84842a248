"""The real local platform for integration tests.

Kafka and Cassandra are started through the platform control (or reused when
already up) once per run; a service that cannot start fails the run with the
tail of its log, never a skip. Services the run started are stopped at its
end; services that were already running are left running.
"""

from __future__ import annotations

import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.settings import Settings
from platformctl import platform
from tests.support.cassandra import SCHEMA_TIMEOUT_S, LaidOutKeyspaces
from tests.support.lake import published_lake  # noqa: F401  (a session fixture)
from tests.support.platform import STARTED_BY_TESTS, TESTS_LOCK

PROJECT_ROOT = Path(__file__).resolve().parents[2]
_START_REPORT: list[str] = []


def pytest_terminal_summary(terminalreporter) -> None:
    for line in _START_REPORT:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def local_platform(settings: Settings) -> Settings:
    """Kafka and Cassandra up and healthy, topics and keyspace provisioned.

    Parallel workers (``pytest -n``) each ask for them under one file lock, so only the
    first starts them; the rest find them healthy.
    """
    STARTED_BY_TESTS.parent.mkdir(parents=True, exist_ok=True)
    with TESTS_LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        already_up = {s.name for s in platform.status(settings) if s.healthy}
        started = time.monotonic()
        # The collector and the speed layer run inside the tests that need them.
        timings = platform.up(settings, ("kafka", "cassandra"))
        fresh = [n for n in ("kafka", "cassandra") if n not in already_up]
        if fresh:
            with STARTED_BY_TESTS.open("a") as out:
                out.writelines(f"{name}\n" for name in fresh)
    _START_REPORT.append(
        f"[platform] services up in {time.monotonic() - started:.1f}s "
        f"(seconds per service: {timings}; already running: {sorted(already_up) or 'none'})"
    )
    return settings


@pytest.fixture
def kafka_admin(local_platform: Settings):
    from confluent_kafka.admin import AdminClient

    return AdminClient(local_platform.kafka.client_config())


@pytest.fixture
def kafka_topic(kafka_admin, unique_name: str) -> Iterator[str]:
    """A fresh single-purpose topic, deleted afterwards."""
    from confluent_kafka.admin import NewTopic

    name = unique_name.replace("_", "-")
    for future in kafka_admin.create_topics([NewTopic(name, num_partitions=3)]).values():
        future.result()
    yield name
    kafka_admin.delete_topics([name])


@pytest.fixture
def cassandra_session(local_platform: Settings):
    from core.cassandra import connect

    cluster, session = connect(local_platform.cassandra)
    yield session
    cluster.shutdown()


@pytest.fixture(scope="session")
def laid_out_keyspaces(local_platform: Settings) -> Iterator[LaidOutKeyspaces]:
    """Keyspaces with every table of the layout, lent to one test at a time (per worker)."""
    from core.cassandra import connect
    from platformctl.services.base import logs_dir

    cluster, session = connect(local_platform.cassandra)
    pool = LaidOutKeyspaces(session, log=logs_dir(local_platform) / "cassandra.log")
    yield pool
    pool.close()
    cluster.shutdown()


@pytest.fixture
def cassandra_keyspace(cassandra_session, unique_name: str) -> Iterator[str]:
    """A fresh keyspace for one test, dropped afterwards."""
    from core.cassandra import ensure_keyspace

    ensure_keyspace(
        cassandra_session, unique_name, {"class": "SimpleStrategy", "replication_factor": 1}
    )
    yield unique_name
    cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {unique_name}", timeout=SCHEMA_TIMEOUT_S)


@pytest.fixture(scope="session")
def spark_cluster(local_platform: Settings, tmp_path_factory) -> Iterator[Settings]:
    """A Spark standalone cluster (a master and two workers) for the run's cluster tests,
    started once: those tests run one after another, in the exclusive part."""
    from tests.support.spark_cluster import standalone_cluster

    with standalone_cluster(local_platform, tmp_path_factory.mktemp("standalone")) as cluster:
        yield cluster
