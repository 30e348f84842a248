"""Cassandra is real: create, insert with prepared statements, select."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration


def test_create_insert_select(cassandra_session, cassandra_keyspace):
    session = cassandra_session
    session.execute(
        f"CREATE TABLE {cassandra_keyspace}.page_views ("
        " page text, minute timestamp, views bigint,"
        " PRIMARY KEY ((page), minute)) WITH CLUSTERING ORDER BY (minute DESC)"
    )
    insert = session.prepare(
        f"INSERT INTO {cassandra_keyspace}.page_views (page, minute, views) VALUES (?, ?, ?)"
    )
    from datetime import UTC, datetime, timedelta

    start = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(10):
        session.execute(insert, ("/home", start + timedelta(minutes=i), i * 10))
    # An upsert of an absolute value replaces, it does not add.
    session.execute(insert, ("/home", start + timedelta(minutes=3), 999))

    select = session.prepare(
        f"SELECT minute, views FROM {cassandra_keyspace}.page_views WHERE page = ? AND minute >= ?"
    )
    rows = list(session.execute(select, ("/home", start + timedelta(minutes=7))))
    assert [r.views for r in rows] == [90, 80, 70]  # clustering order: newest first
    total = sum(r.views for r in session.execute(select, ("/home", start)))
    assert total == sum(i * 10 for i in range(10)) - 30 + 999


def test_platform_keyspace_exists(local_platform, cassandra_session):
    rows = cassandra_session.execute(
        "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s",
        (local_platform.cassandra.keyspace,),
    )
    assert rows.one() is not None
