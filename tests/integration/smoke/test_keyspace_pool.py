"""The suite's pool of laid-out keyspaces lends each test an empty one: what a test wrote,
rows and tombstones alike, is gone for the next, and tables it never wrote to are left
alone (no truncation to pay for them)."""

from __future__ import annotations

import pytest

from tests.support.cassandra import LaidOutKeyspaces

pytestmark = pytest.mark.integration


@pytest.fixture
def pool(cassandra_session):
    """A pool of this test's own, its keyspaces dropped at the end."""
    pool = LaidOutKeyspaces(cassandra_session)
    yield pool
    pool.close()


def test_a_keyspace_lent_again_holds_no_row_and_no_tombstone_of_the_last_test(
    local_platform, cassandra_session, pool
):
    with pool.lend(local_platform) as first:
        keyspace = first.cassandra.keyspace
        cassandra_session.execute(
            f"INSERT INTO {keyspace}.batch_boundary (view_name, version) VALUES ('v', 1)"
        )
        # A delete stamped later than the next test's insert: only a truncation undoes it.
        cassandra_session.execute(
            f"DELETE FROM {keyspace}.batch_days USING TIMESTAMP 2000 WHERE view_name = 'v'"
        )
    assert pool.truncated == 2, "only the two tables written to are truncated"

    with pool.lend(local_platform) as second:
        assert second.cassandra.keyspace == keyspace, "the same keyspace is lent again"
        assert not list(cassandra_session.execute(f"SELECT * FROM {keyspace}.batch_boundary"))
        cassandra_session.execute(
            f"INSERT INTO {keyspace}.batch_days (view_name, day, rows) "
            "VALUES ('v', '2026-01-01', 7) USING TIMESTAMP 1000"
        )
        rows = list(cassandra_session.execute(f"SELECT rows FROM {keyspace}.batch_days"))
        assert [r.rows for r in rows] == [7], "the last test's tombstone is gone"
    assert pool.truncated == 3


def test_tables_a_test_made_or_dropped_are_undone_and_a_changed_table_costs_the_keyspace(
    local_platform, cassandra_session, pool
):
    with pool.lend(local_platform) as first:
        keyspace = first.cassandra.keyspace
        made = pool._schema(keyspace)
        # What a replay's switch does: tables of a new version, the old ones dropped.
        cassandra_session.execute(f"CREATE TABLE {keyspace}.speed_v1_x (k int PRIMARY KEY)")
        cassandra_session.execute(f"DROP TABLE {keyspace}.speed_clicks")
    assert pool.restored == 1

    with pool.lend(local_platform) as second:
        assert second.cassandra.keyspace == keyspace, "the same keyspace is lent again"
        assert pool._schema(keyspace) == made
        cassandra_session.execute(f"ALTER TABLE {keyspace}.speed_clicks ADD extra text")

    with pool.lend(local_platform) as third:
        assert third.cassandra.keyspace != keyspace, "a changed table costs the keyspace"
    names = {
        r.keyspace_name
        for r in cassandra_session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
    }
    assert keyspace not in names
