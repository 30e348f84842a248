"""The reads the platform decides on, and their writes, reach Cassandra at LOCAL_QUORUM.

Each request a session sends is seen through the driver's request listener
(the consistency in the message that goes to the server), and a keyspace
replicated three times on the one local node proves the server applies it:
a quorum of three cannot be met by one node, where LOCAL_ONE would be.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.cassandra import SCHEMA_TIMEOUT_S

pytestmark = pytest.mark.integration


class Sent:
    """Every request ``session`` sends from now on: (statement, consistency level name)."""

    def __init__(self, session) -> None:
        self.session, self.requests = session, []
        session.add_request_init_listener(self._seen)

    def _seen(self, future) -> None:
        from cassandra import ConsistencyLevel

        query = future.query
        cql = getattr(getattr(query, "prepared_statement", None), "query_string", None)
        cql = cql or getattr(query, "query_string", None) or type(query).__name__
        level = ConsistencyLevel.value_to_name.get(future.message.consistency_level)
        self.requests.append((cql, level))

    def levels(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for cql, level in self.requests:
            out.setdefault(cql, set()).add(level)
        return out

    def close(self) -> None:
        self.session.remove_request_init_listener(self._seen)


@pytest.fixture
def keyspace_settings(local_platform, cassandra_keyspace):
    return local_platform.model_copy(
        update={
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            )
        }
    )


def _clicks_tables(session, keyspace: str):
    from layout import ViewTables, create_view_tables
    from views import view

    tables = ViewTables(view("clicks"), keyspace, "speed")
    create_view_tables(session, tables, 3600)
    return tables


def test_the_fold_reads_and_writes_its_rows_at_local_quorum(keyspace_settings, cassandra_session):
    from core.cassandra import process_session
    from speed_layer.sink import Writer, fold_rows

    settings = keyspace_settings
    tables = _clicks_tables(cassandra_session, settings.cassandra.keyspace)
    minute = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=3)
    run = uuid.uuid4()
    sent = Sent(process_session(settings.cassandra))
    try:
        for batch_id, clicks in enumerate((2, 3)):
            row = {"window_start": minute, "target": "buy", "clicks": clicks}
            assert fold_rows([row], tables, settings.cassandra, Writer(run, batch_id, 1)) == 1
    finally:
        sent.close()

    (stored,) = cassandra_session.execute(f"SELECT clicks, run_id FROM {tables.by_minute}")
    assert (stored.clicks, stored.run_id) == (5, run)  # the second batch read the first's row
    levels = sent.levels()
    assert levels == {
        tables.select_stored_window(): {"LOCAL_QUORUM"},
        tables.insert_by_key(): {"LOCAL_QUORUM"},
        tables.insert_by_minute(): {"LOCAL_QUORUM"},
    }


def test_the_pointers_the_jobs_and_serving_follow_are_read_and_written_at_local_quorum(
    keyspace_settings,
):
    from core.cassandra import connect
    from layout import (
        ViewTables,
        create_tables,
        create_view_tables,
        read_boundaries,
        read_live_floor,
        read_reconcile_results,
        read_speed_versions,
        read_watermarks,
    )
    from serving.store import ServingStore
    from speed_layer.replay import switch
    from speed_layer.start import (
        REPLAYING,
        StartPosition,
        current_start,
        pending_replay,
        read_runs,
        record_start,
        update_run,
    )
    from tests.support.web import WEB_VIEWS

    settings = keyspace_settings
    create_tables(settings)
    names = [spec.name for spec in WEB_VIEWS]
    cluster, session = connect(settings.cassandra)
    for spec in WEB_VIEWS:  # the replay's version
        tables = ViewTables(spec, settings.cassandra.keyspace, "speed", table_version=1)
        create_view_tables(session, tables, settings.speed.ttl_s)
    sent = Sent(session)
    try:
        now = datetime.now(UTC)
        live = StartPosition(created_at=now)
        replay = StartPosition(generation=1, created_at=now, version=1, state=REPLAYING)
        record_start(session, settings, live)
        record_start(session, settings, replay)
        assert pending_replay(session, settings).generation == 1
        update_run(session, settings, 1, kafka_lag=0)
        switch(session, settings, live, replay, WEB_VIEWS)
        assert current_start(session, settings).generation == 1
        assert read_speed_versions(session, settings.cassandra.keyspace, names) == dict.fromkeys(
            names, 1
        )
        assert [run.state for run in read_runs(session, settings)] == ["live", "retired"]
        read_boundaries(settings.cassandra, names, session=session)
        read_watermarks(settings.cassandra, names, session=session)
        read_live_floor(session, settings.cassandra.keyspace, settings.speed.checkpoint_name)
        read_reconcile_results(session, settings.cassandra.keyspace, names)
        store_requests = len(sent.requests)

        async def serve() -> None:  # serving's pointer reads, prepared by serving itself
            store = ServingStore(
                session, settings.cassandra.keyspace, views=WEB_VIEWS, pointer_cache_s=0
            )
            pointers = await store.pointers()
            assert {p.speed_version for p in pointers.views.values()} == {1}

        asyncio.run(serve())
    finally:
        sent.close()
        cluster.shutdown()

    assert len(sent.requests) > store_requests  # serving's reads were seen too
    kinds = {cql.split()[0] for cql, _ in sent.requests}
    assert {"SELECT", "INSERT", "UPDATE", "BatchStatement"} <= kinds
    wrong = {cql: levels for cql, levels in sent.levels().items() if levels != {"LOCAL_QUORUM"}}
    assert wrong == {}


def test_a_fold_on_a_keyspace_replicated_three_times_needs_a_quorum_of_its_replicas(
    local_platform, cassandra_session, unique_name
):
    """One node holds one of three replicas: a read at LOCAL_ONE would be served (and could
    miss the last write on a real cluster); the fold's LOCAL_QUORUM read is refused."""
    from cassandra import ConsistencyLevel, Unavailable
    from cassandra.cluster import NoHostAvailable

    from core.cassandra import ensure_keyspace
    from speed_layer.sink import Writer, fold_rows

    keyspace = f"{unique_name}_rf3"
    ensure_keyspace(
        cassandra_session, keyspace, {"class": "SimpleStrategy", "replication_factor": 3}
    )
    try:
        tables = _clicks_tables(cassandra_session, keyspace)
        cassandra = local_platform.cassandra.model_copy(update={"keyspace": keyspace})
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        row = {"window_start": minute, "target": "buy", "clicks": 1}
        with pytest.raises(NoHostAvailable) as refused:  # the one node answered Unavailable
            fold_rows([row], tables, cassandra, Writer(uuid.uuid4(), 0, 1))
        (error,) = refused.value.errors.values()
        assert isinstance(error, Unavailable), error
        assert error.consistency == ConsistencyLevel.LOCAL_QUORUM
        assert (error.required_replicas, error.alive_replicas) == (2, 1)
    finally:
        cassandra_session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}", timeout=SCHEMA_TIMEOUT_S)
