"""Every table of the platform, created in one place.

:func:`create_tables` runs on ``platformctl up`` (Cassandra's provisioning),
at the start of the speed job and of ``speed_layer reset``, and in the tests;
``python -m infra.terraform.generate`` turns :func:`create_statements` into
the production (Amazon Keyspaces) tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from core.cassandra import execute_schema
from layout.pointers import (
    DAYS_COLUMNS,
    DAYS_TABLE,
    RUNS_COLUMNS,
    RUNS_TABLE,
    PointerTables,
    missing_columns,
)
from layout.reads import read_speed_versions
from layout.views import GRAINS, ViewTables, view_tables

if TYPE_CHECKING:
    from core.settings import Settings
    from views.spec import ViewSpec

__all__ = [
    "apply_ttl",
    "create_statements",
    "create_tables",
    "create_view_tables",
    "ensure_columns",
]


def create_statements(
    keyspace: str, ttl_s: int, views: Sequence[ViewSpec] | None = None, *, speed: bool = True
) -> list[str]:
    """Every CREATE TABLE (idempotent): the speed tables (version 0) of ``views`` (default
    every view of every declared pipeline, :func:`pipelines.declared_views`), rows expiring after
    ``ttl_s``; their batch tables, at every grain (:data:`layout.views.GRAINS`); then the
    pointer and bookkeeping tables (:mod:`layout.pointers`) and the issued tokens'
    (:mod:`access.store`, which owns its statements). Serving prepares its reads of
    both layers' tables of every view it serves, so each view gets both.

    ``speed=False`` leaves out the speed view tables: the speed job owns them (it
    creates its version's tables at start and a replay's new ones, and drops superseded
    versions), so infrastructure code declares everything else (``infra/terraform``).
    """
    from access.store import create_statement as tokens_table

    if views is None:
        from pipelines import declared_views

        views = declared_views()
    speed_tables = view_tables(keyspace, "speed", views) if speed else []
    return [
        *(s for tables in speed_tables for s in tables.create(ttl_s)),
        *(
            s
            for tables in view_tables(keyspace, "batch", views, grains=GRAINS)
            for s in tables.create()
        ),
        *PointerTables(keyspace).create(),
        tokens_table(keyspace),
    ]


def create_tables(settings: Settings, views: Sequence[ViewSpec] | None = None) -> None:
    """Create every table (idempotent), and add the columns an older table lacks.

    The speed tables are those of each view's current version (``speed_versions``):
    after a replay switched a view to ``speed_v<N>_*``, the superseded tables are
    dropped and not created again. Columns a newer release added (progress and run
    columns, the fence, a view's new measure) are added in place, and speed tables
    created with another TTL get ``settings.speed.ttl_s`` (:func:`apply_ttl`).
    """
    from access.store import create_statement as tokens_table
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    try:
        keyspace = settings.cassandra.keyspace
        for statement in [*PointerTables(keyspace).create(), tokens_table(keyspace)]:
            execute_schema(session, statement)
        for statement in missing_columns(session, keyspace):  # tables of older versions
            execute_schema(session, statement)
        for statement in missing_columns(session, keyspace, RUNS_TABLE, RUNS_COLUMNS):
            execute_schema(session, statement)
        for statement in missing_columns(session, keyspace, DAYS_TABLE, DAYS_COLUMNS):
            execute_schema(session, statement)
        if views is None:
            from pipelines import declared_views

            views = declared_views()
        versions = read_speed_versions(session, keyspace, [spec.name for spec in views])
        speed = [
            ViewTables(spec, keyspace, "speed", table_version=versions[spec.name]) for spec in views
        ]
        batch = view_tables(keyspace, "batch", views, grains=GRAINS)
        for statement in [
            *(s for tables in speed for s in tables.create(settings.speed.ttl_s)),
            *(s for tables in batch for s in tables.create()),
        ]:
            execute_schema(session, statement)
        for tables in [*speed, *batch]:
            ensure_columns(session, tables)
        for tables in speed:
            apply_ttl(session, tables, settings.speed.ttl_s)
    finally:
        cluster.shutdown()


def create_view_tables(session, tables: ViewTables, ttl_s: int | None) -> None:
    """Create one view's tables in one layer and version (idempotent), with every column and,
    for speed tables, rows expiring after ``ttl_s`` (:func:`apply_ttl`)."""
    for statement in tables.create(ttl_s):
        execute_schema(session, statement)
    ensure_columns(session, tables)
    if ttl_s is not None:
        apply_ttl(session, tables, ttl_s)


def apply_ttl(session, tables: ViewTables, ttl_s: int) -> list[str]:
    """Give both tables ``ttl_s`` as their default TTL where they have another; return the
    ALTER statements run.

    ``CREATE TABLE IF NOT EXISTS`` leaves an existing table's TTL as it was created, so a
    raised ``speed.ttl_s`` would not reach the rows while serving already counts on it.
    Rows written before the change keep the TTL they were written with.
    """
    keyspace = tables.keyspace
    names = [table.split(".", 1)[1] for table in (tables.by_key, tables.by_minute)]
    current = {
        row.table_name: row.default_time_to_live
        for row in session.execute(
            "SELECT table_name, default_time_to_live FROM system_schema.tables "
            "WHERE keyspace_name = %s",
            (keyspace,),
        )
        if row.table_name in names
    }
    missing = [name for name in names if name not in current]
    if missing:
        raise ValueError(
            f"Tables {missing} of keyspace {keyspace!r} do not exist; create them first "
            "(layout.create_tables)."
        )
    statements = [
        statement
        for name, statement in zip(names, tables.alter_ttl(ttl_s), strict=True)
        if current[name] != ttl_s
    ]
    for statement in statements:
        execute_schema(session, statement)
    return statements


def ensure_columns(session, tables: ViewTables) -> None:
    """Add the columns tables of an older release lack (:meth:`ViewTables.added_columns`)."""
    for table, columns in tables.added_columns().items():
        keyspace, name = table.split(".", 1)
        for statement in missing_columns(session, keyspace, name, columns):
            execute_schema(session, statement)
