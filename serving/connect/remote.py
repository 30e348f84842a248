"""Spark Connect sessions the platform opens as a client: the SQL server's health probe and
the API's ``POST /v1/sql``.

pyspark registers an exit hook for every Connect client it creates, which asks the server to
clean its ML cache. A process whose server is gone when it exits (the SQL server stops its own
Spark before it returns; the API may outlive a restarted server) then spends minutes in that
call's retries and cannot exit: a ``platformctl down`` or a supervisor's restart waits for it,
then kills it. These sessions never cache a model, so the hook is removed, and a session is
closed (its channel) when it is dropped.

:class:`SessionSource` gives each statement a server-side session of its own (a new session
id: its own settings, temporary views and variables) over one gRPC channel, and releases it
after use, in the background. Each session sends its own caller's credential (the server
binds the session to that identity: its grants, its limit, its audit records), not the
channel's: the channel carries no token, and every call of a session carries its bearer.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import threading

import grpc
from pyspark.sql.connect.client import DefaultChannelBuilder
from pyspark.sql.connect.client.retries import DefaultPolicy
from pyspark.sql.connect.session import SparkSession

__all__ = ["SessionSource", "close_session", "remote_session"]

RECONNECT_BACKOFF_MS = 1000
"""Longest wait of a channel between two attempts to reach a server that went away (gRPC's
default grows to 120 s): a restarted server is reached again within about a second."""
ATTEMPTS = 3
"""Retries of one call while the server is unreachable (about 1 s in all), not pyspark's 15
over ten minutes: a request then answers that the server is down instead of waiting."""


def remote_session(url: str) -> SparkSession:
    """A new Connect session on ``url`` (never a process-wide default one), with no exit hook."""
    session = SparkSession.builder.remote(url).create()
    _drop_exit_hook(session)
    return session


def close_session(session: SparkSession | None) -> None:
    """Close ``session``'s channel. Not ``session.stop()``: its release call retries for
    minutes while the server does not answer; the server drops an idle session itself."""
    if session is None:
        return
    with contextlib.suppress(Exception):
        session.client.close()


def _drop_exit_hook(session: SparkSession) -> None:
    hook = getattr(session.client, "_cleanup_ml_cache", None)
    if hook is not None:
        atexit.unregister(hook)


class SessionSource:
    """New Spark Connect sessions on ``url``, one per :meth:`open`, sharing one gRPC channel.

    A session shares no state with any other: whatever a statement sets (``SET``, a
    temporary view, a variable) ends with its session. The channel is opened once (no TCP
    and HTTP/2 handshake per session) and reconnects by itself, within about a second of a
    restarted server listening again; calls give up after about a second while the server
    is unreachable.

    >>> source = SessionSource("sc://localhost:1/;token=t")
    >>> a, b = source.open(), source.open("ana's")
    >>> a.client._session_id != b.client._session_id
    True
    >>> a.client._channel is b.client._channel
    True
    >>> [value for key, value in b.client._builder.metadata() if key == "authorization"]
    ["Bearer ana's"]
    >>> source.close()
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._channel: grpc.Channel | None = None
        self._lock = threading.Lock()
        self._releases = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="sql-release")

    def open(self, credential: str | None = None) -> SparkSession:
        """A session of its own (nothing is sent until it runs a statement), whose calls carry
        ``credential`` (default: the URL's token)."""
        shared = _Shared(self.url, self._shared_channel(), credential)
        session = _OnSharedChannel(connection=shared)
        _drop_exit_hook(session)
        session.client.set_retry_policies(
            [DefaultPolicy(max_retries=ATTEMPTS, max_backoff=RECONNECT_BACKOFF_MS)]
        )
        return session

    def release(self, session: SparkSession) -> None:
        """Ask the server to drop ``session`` (its executions, settings, views), in the
        background: the caller's answer never waits for it. An unreachable server has
        dropped it already."""

        def release() -> None:
            with contextlib.suppress(Exception):
                session.client.release_session()

        with contextlib.suppress(RuntimeError):  # closed: the process is stopping
            self._releases.submit(release)

    def close(self) -> None:
        """Finish the pending releases (a few seconds at most), then close the channel."""
        self._releases.shutdown(wait=True, cancel_futures=False)
        with self._lock:
            channel, self._channel = self._channel, None
        if channel is not None:
            with contextlib.suppress(Exception):
                channel.close()

    def _shared_channel(self) -> grpc.Channel:
        with self._lock:
            if self._channel is None:
                options = [
                    ("grpc.initial_reconnect_backoff_ms", RECONNECT_BACKOFF_MS // 4),
                    ("grpc.min_reconnect_backoff_ms", RECONNECT_BACKOFF_MS // 4),
                    ("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS),
                ]
                self._channel = DefaultChannelBuilder(channel_url(self.url), options).toChannel()
            return self._channel


def channel_url(url: str) -> str:
    """``url`` without its token, for a channel whose calls each carry their own: TLS to any
    host but this machine, as a URL with the token would have it.

    >>> channel_url("sc://localhost:15002/;token=t;user_agent=x")
    'sc://localhost:15002/;user_agent=x'
    >>> channel_url("sc://sql.internal:15002/;token=t")
    'sc://sql.internal:15002/;use_ssl=true'
    """
    base, *params = url.split(";")
    kept = [p for p in params if not p.startswith(f"{DefaultChannelBuilder.PARAM_TOKEN}=")]
    local = base.startswith("sc://localhost:") or base.startswith("sc://localhost/")
    if len(kept) < len(params) and not local and "use_ssl=true" not in kept:
        kept.append("use_ssl=true")
    return ";".join([base, *kept])


class _Shared(DefaultChannelBuilder):
    """``url``'s parameters (user agent) on a channel opened once, and the bearer of one
    caller (``credential``, else the URL's token) on every call."""

    def __init__(self, url: str, channel: grpc.Channel, credential: str | None) -> None:
        super().__init__(url)
        self._shared = channel
        bearer = credential if credential is not None else self.token
        self._bearer = [] if bearer is None else [("authorization", f"Bearer {bearer}")]

    def toChannel(self) -> grpc.Channel:
        return self._shared

    def metadata(self) -> list[tuple[str, str]]:
        return [*super().metadata(), *self._bearer]


class _OnSharedChannel(SparkSession):
    """A session on a channel other sessions use: dropping it leaves the channel open
    (pyspark's session closes its client's channel when it is collected, and with it a pool
    of release calls every client in the process shares)."""

    def __del__(self) -> None:
        return
