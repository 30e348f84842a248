"""Spark Connect sessions the platform opens as a client: the SQL server's health probe and
the API's ``POST /v1/sql``.

pyspark registers an exit hook for every Connect client it creates, which asks the server to
clean its ML cache. A process whose server is gone when it exits (the SQL server stops its own
Spark before it returns; the API may outlive a restarted server) then spends minutes in that
call's retries and cannot exit: a ``platformctl down`` or a supervisor's restart waits for it,
then kills it. These sessions never cache a model, so the hook is removed, and a session is
closed (its channel) when it is dropped.
"""

from __future__ import annotations

import atexit
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession

__all__ = ["close_session", "remote_session"]


def remote_session(url: str) -> SparkSession:
    """A new Connect session on ``url`` (never a process-wide default one), with no exit hook."""
    from pyspark.sql.connect.session import SparkSession

    session = SparkSession.builder.remote(url).create()
    hook = getattr(session.client, "_cleanup_ml_cache", None)
    if hook is not None:
        atexit.unregister(hook)
    return session


def close_session(session: SparkSession | None) -> None:
    """Close ``session``'s channel. Not ``session.stop()``: its release call retries for
    minutes while the server does not answer; the server drops an idle session itself."""
    if session is None:
        return
    with contextlib.suppress(Exception):
        session.client.close()
