"""Uvicorn's HTTP protocols with a header-read timeout (the collector's and serving's servers).

Uvicorn closes a keep-alive connection that stays idle between requests
(``timeout_keep_alive``), but it waits for a request's line and headers as
long as the client likes: five clients that each open connections and send
half a request's headers (a slow loris) hold them for good. The protocols
here close a connection whose request line and headers have not all arrived
``header_timeout_s`` after its first byte, or after the connection opened
when nothing came; the keep-alive timeout still rules between requests.

    config = uvicorn.Config(app, http=http_protocol(10.0, requests_per_connection=1000), ...)

They also end a keep-alive connection after ``requests_per_connection`` requests (the
last answer says ``connection: close``), as nginx's ``keepalive_requests`` does: workers
sharing a port (``SO_REUSEPORT``) are given connections, not requests, so a client that
keeps a few connections open for good (a load balancer, a benchmark) would stay on the
worker the kernel first hashed it to; reconnecting spreads it again.

The same protocols send a response in one write: uvicorn writes a response's head and
its body separately, two sends on the socket (and two reads for the client) for a
response of a few hundred bytes. Here the writes made in one turn of the event loop are
joined and sent at its end (:class:`_OneSend`), in the order they were made; closing the
connection sends what is pending first.

Only the collector and serving import this (uvicorn is theirs).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["http_protocol"]


class _OneSend:
    """A transport whose writes in one turn of the event loop leave in one send.

    Everything but writing and closing is the transport's own (flow control, extra info,
    ``is_closing``): the protocol's ``pause_writing`` still comes from it.
    """

    __slots__ = ("_loop", "_pending", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._pending: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if not self._pending:
            self._loop.call_soon(self._send)
        self._pending.append(data)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def _send(self) -> None:
        if self._pending:
            data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self._send()
        self._transport.close()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _HeaderDeadline:
    """What both protocols share: a timer from a request's first byte (or the connection's
    start) to its last header; when it fires the connection is closed. And the count of the
    connection's requests, the last one answered ``connection: close``."""

    header_timeout_s: float = 10.0
    requests_per_connection: int = 0
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    cycle: Any = None
    _header_timer: asyncio.TimerHandle | None = None
    _requests: int = 0

    def _count_request(self) -> None:
        """A request's cycle has begun: the connection's last one, once it is the limit."""
        self._requests += 1
        limit = self.requests_per_connection
        if limit and self._requests >= limit and self.cycle is not None:
            self.cycle.keep_alive = False

    def _arm_header_deadline(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_deadline(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self.transport = _OneSend(transport, self.loop)  # type: ignore[assignment]
        self._arm_header_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_deadline()
        super().connection_lost(exc)  # type: ignore[misc]


class _H11HeaderDeadline(_HeaderDeadline, H11Protocol):
    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        if self.cycle is not before:
            self._count_request()
        if self.conn.their_state is h11.IDLE:  # a request begun, its headers not complete
            self._arm_header_deadline()
        else:
            self._disarm_header_deadline()


def _httptools_class() -> type | None:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # httptools is optional; uvicorn then speaks h11
        return None

    class _HttpToolsHeaderDeadline(_HeaderDeadline, HttpToolsProtocol):
        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_header_deadline()

        def on_headers_complete(self) -> None:
            self._disarm_header_deadline()
            before = self.cycle
            super().on_headers_complete()
            if self.cycle is not before:
                self._count_request()

    return _HttpToolsHeaderDeadline


def http_protocol(
    header_timeout_s: float, http: str = "auto", requests_per_connection: int = 0
) -> type[asyncio.Protocol]:
    """The ``http=`` protocol class of ``uvicorn.Config``: ``httptools`` when installed
    (``auto``, as uvicorn chooses) or ``h11``, closing a connection whose headers take longer
    than ``header_timeout_s``, and after ``requests_per_connection`` requests (0: never)."""
    if header_timeout_s <= 0:
        raise ValueError(
            f"A header timeout is a positive number of seconds, got {header_timeout_s}."
        )
    if requests_per_connection < 0:
        raise ValueError(f"requests_per_connection must be >= 0, got {requests_per_connection}.")
    if http not in ("auto", "httptools", "h11"):
        raise ValueError(f"http must be 'auto', 'httptools' or 'h11', got {http!r}.")
    base = _httptools_class() if http != "h11" else None
    if base is None and http == "httptools":
        raise ValueError("http='httptools' needs the httptools package: pip install httptools.")
    base = base or _H11HeaderDeadline
    return type(
        base.__name__,
        (base,),
        {
            "header_timeout_s": float(header_timeout_s),
            "requests_per_connection": int(requests_per_connection),
        },
    )
