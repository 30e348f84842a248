"""Every table of the platform, created in one place.

:func:`create_tables` runs on ``platformctl up`` (Cassandra's provisioning),
at the start of the speed job and of ``speed_layer reset``, and in the tests;
``python -m infra.terraform.generate`` turns :func:`create_statements` into
the production (Amazon Keyspaces) tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from layout.pointers import PointerTables, missing_columns
from layout.views import view_tables

if TYPE_CHECKING:
    from core.settings import Settings
    from views.spec import ViewSpec

__all__ = ["create_statements", "create_tables"]


def create_statements(
    keyspace: str, ttl_s: int, views: Sequence[ViewSpec] | None = None
) -> list[str]:
    """Every CREATE TABLE (idempotent): the speed tables of ``views`` (default
    :data:`views.registry.VIEWS`, every view a pipeline can name), rows expiring after
    ``ttl_s``; their batch tables; then the pointer and bookkeeping tables
    (:mod:`layout.pointers`). Serving prepares its reads of both layers' tables of every
    view it serves, so each view gets both pairs."""
    return [
        *(s for tables in view_tables(keyspace, "speed", views) for s in tables.create(ttl_s)),
        *(s for tables in view_tables(keyspace, "batch", views) for s in tables.create()),
        *PointerTables(keyspace).create(),
    ]


def create_tables(settings: Settings) -> None:
    """Create every table (idempotent), and add the progress columns an older table lacks."""
    from core.cassandra import connect

    cluster, session = connect(settings.cassandra)
    try:
        keyspace = settings.cassandra.keyspace
        for statement in create_statements(keyspace, settings.speed.ttl_s):
            session.execute(statement)
        for statement in missing_columns(session, keyspace):  # tables of older versions
            session.execute(statement)
        for tables in view_tables(keyspace, "speed"):
            for table, columns in tables.added_columns().items():
                name = table.split(".", 1)[1]
                for statement in missing_columns(session, keyspace, name, columns):
                    session.execute(statement)
    finally:
        cluster.shutdown()
