"""The layout against the real Cassandra: every table created (twice, safely), older progress
tables brought up to date, and the boundary read back as publish writes it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.settings import Settings
from layout import (
    PROGRESS_COLUMNS,
    PROGRESS_TABLE,
    Boundary,
    PointerTables,
    create_statements,
    create_tables,
    read_boundaries,
)
from tests.support.web import WEB_VIEWS

pytestmark = pytest.mark.integration


@pytest.fixture
def keyspace_settings(local_platform: Settings, cassandra_keyspace: str) -> Settings:
    return local_platform.model_copy(
        update={
            "cassandra": local_platform.cassandra.model_copy(
                update={"keyspace": cassandra_keyspace}
            )
        }
    )


def _tables(session, keyspace: str) -> dict[str, set[str]]:
    rows = session.execute(
        "SELECT table_name, column_name FROM system_schema.columns WHERE keyspace_name = %s",
        (keyspace,),
    )
    out: dict[str, set[str]] = {}
    for row in rows:
        out.setdefault(row.table_name, set()).add(row.column_name)
    return out


def test_every_table_is_created_and_creating_again_changes_nothing(
    keyspace_settings: Settings, cassandra_session
):
    keyspace = keyspace_settings.cassandra.keyspace
    create_tables(keyspace_settings)
    first = _tables(cassandra_session, keyspace)
    create_tables(keyspace_settings)
    assert _tables(cassandra_session, keyspace) == first
    expected = {
        s.split(f"{keyspace}.", 1)[1].split(" ", 1)[0] for s in create_statements(keyspace, 60)
    }
    assert set(first) == expected
    assert {f"speed_{v.name}" for v in WEB_VIEWS} | {f"batch_{v.name}" for v in WEB_VIEWS} <= set(
        first
    )


def test_an_older_progress_table_gets_the_columns_it_lacks(
    keyspace_settings: Settings, cassandra_session
):
    keyspace = keyspace_settings.cassandra.keyspace
    cassandra_session.execute(
        f"CREATE TABLE {keyspace}.{PROGRESS_TABLE} (view_name text PRIMARY KEY, batch_id bigint)"
    )
    create_tables(keyspace_settings)
    columns = _tables(cassandra_session, keyspace)[PROGRESS_TABLE]
    assert columns == {"view_name", *PROGRESS_COLUMNS}


def test_the_boundary_publish_writes_is_read_back_in_utc(
    keyspace_settings: Settings, cassandra_session
):
    keyspace = keyspace_settings.cassandra.keyspace
    create_tables(keyspace_settings)
    at = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    published_at = datetime(2024, 5, 1, 10, 7, 30, tzinfo=UTC)
    cassandra_session.execute(
        cassandra_session.prepare(PointerTables(keyspace).insert_boundary),
        ("page_activity", at, 17, "run-1", published_at),
    )
    read = read_boundaries(keyspace_settings.cassandra, ["page_activity", "clicks"])
    assert read == {"page_activity": Boundary(at, 17, "run-1", published_at), "clicks": None}
    # The same read on a caller's session, as publish makes it.
    again = read_boundaries(
        keyspace_settings.cassandra, ["page_activity"], session=cassandra_session
    )
    assert again["page_activity"] == read["page_activity"]
