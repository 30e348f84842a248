"""Maintenance on the real Cassandra batch tables: what serving reads is never deleted."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from batch_layer.maintenance import drop_superseded
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from layout import GRAINS, ViewTables
from tests.support.web import WEB_EVENTS
from views import view

# drop_superseded reads every minute of a day per version: minutes on a busy machine.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]


def _rows_of(session, keyspace: str, version: int) -> int:
    rows = session.execute(f"SELECT version FROM {keyspace}.batch_page_activity")
    return sum(1 for r in rows if r.version == version)


def _tables(keyspace: str) -> list[ViewTables]:
    """Every batch table pair of the pipeline's views, at every grain."""
    return [
        ViewTables(view(name), keyspace, "batch", grain=grain)
        for name in WEB_EVENTS.views
        for grain in GRAINS
    ]


def _rows_at(session, keyspace: str, version: int) -> dict[str, int]:
    """{table: rows of ``version``} of every batch table of every view, at every grain."""
    out = {}
    for tables in _tables(keyspace):
        for table in (tables.by_key, tables.by_minute):
            rows = session.execute(f"SELECT version FROM {table}")
            out[table.split(".")[1]] = sum(1 for r in rows if r.version == version)
    return out


def _copy_version(session, keyspace: str, source: int, target: int) -> None:
    """Every row of version ``source`` written again under ``target``, at every grain."""
    for tables in _tables(keyspace):
        measures = [m.name for m in tables.spec.measures]
        by_key = session.prepare(tables.insert_by_key())
        by_window = session.prepare(tables.insert_by_minute())
        for r in session.execute(f"SELECT * FROM {tables.by_key}"):
            if r.version == source:
                key_row, window_row = tables.bind(
                    r.window_start.replace(tzinfo=UTC),
                    [getattr(r, k) for k in tables.spec.keys],
                    [getattr(r, m) for m in measures],
                    version=target,
                )
                session.execute(by_key, key_row)
                session.execute(by_window, window_row)


def test_a_publish_that_died_between_its_two_writes_keeps_the_served_version(
    spark, pipeline_settings, run_pipeline, cassandra_session
):
    batch = pipeline_settings.batch.model_copy(update={"superseded_version_grace_s": 0})
    settings = pipeline_settings.model_copy(update={"batch": batch})
    keyspace = settings.cassandra.keyspace
    start = datetime(2024, 3, 1, 12, tzinfo=UTC)
    produce_direct(generate(SimulatorConfig(seed=5, events=40, rate=1, start=start)), settings)
    published = run_pipeline(settings, "run-1")["publish"]
    (day,) = published.days
    served = published.version
    assert _rows_of(cassandra_session, keyspace, served) > 0

    # A second publish recorded the served version as superseded, then died before
    # pointing batch_days at its new version; an older version, with its hour and day
    # rollups, was really replaced.
    replaced = served - 1
    _copy_version(cassandra_session, keyspace, served, replaced)
    before = _rows_at(cassandra_session, keyspace, replaced)
    assert before == _rows_at(cassandra_session, keyspace, served)
    rollups = ("_hours", "_by_hour", "_days", "_by_day")
    assert all(before[f"batch_page_activity{t}"] > 0 for t in rollups)
    long_ago = datetime.now(UTC) - timedelta(days=1)
    record = cassandra_session.prepare(
        f"INSERT INTO {keyspace}.batch_superseded (view_name, day, version, superseded_at) "
        "VALUES (?, ?, ?, ?)"
    )
    for name in WEB_EVENTS.views:
        cassandra_session.execute(record, (name, day, served, long_ago))
        cassandra_session.execute(record, (name, day, replaced, long_ago))

    dropped = drop_superseded(settings, WEB_EVENTS)

    assert dropped == len(WEB_EVENTS.views)  # the replaced versions only
    assert _rows_of(cassandra_session, keyspace, served) > 0
    # Every grain of the replaced version is gone, and every grain of the served one stays.
    assert set(_rows_at(cassandra_session, keyspace, replaced).values()) == {0}
    assert _rows_at(cassandra_session, keyspace, served) == before
    pointers = cassandra_session.execute(f"SELECT view_name, version FROM {keyspace}.batch_days")
    assert {r.version for r in pointers} == {served}
    listed = cassandra_session.execute(f"SELECT version FROM {keyspace}.batch_superseded")
    assert {r.version for r in listed} == {served}  # still listed for a later publish
