"""Uvicorn with a header-read timeout: half-sent requests are dropped, whole ones answered,
idle keep-alive connections left to the keep-alive timeout (both HTTP implementations)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from core.http_server import http_protocol
from tests.support.ports import free_port


async def _app(scope, receive, send) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@contextmanager
def _server(http: str, header_timeout_s: float, requests_per_connection: int = 0) -> Iterator[int]:
    port = free_port()
    config = uvicorn.Config(
        _app,
        host="127.0.0.1",
        port=port,
        http=http_protocol(header_timeout_s, http, requests_per_connection),
        timeout_keep_alive=30,
        log_level="warning",
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        while sock.recv(1024):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_half_sent_requests_are_closed_and_whole_ones_answered(http):
    with _server(http, header_timeout_s=1.0) as port:
        silent = socket.create_connection(("127.0.0.1", port))  # sends nothing at all
        partial = []
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: slo")
            partial.append(sock)
        started = time.monotonic()
        assert all(_closed_within(sock, 5) for sock in [*partial, silent])
        assert time.monotonic() - started < 3
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            assert client.get("/").text == "ok"
            time.sleep(1.5)  # idle on a keep-alive connection: longer than the header timeout
            assert client.get("/").text == "ok"
            assert client.get("/").text == "ok"


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_a_second_request_sent_by_halves_on_a_kept_connection_is_closed(http):
    with _server(http, header_timeout_s=1.0) as port:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.settimeout(5)
        assert b"200" in sock.recv(1024)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        assert _closed_within(sock, 5)


def _answer(sock: socket.socket) -> bytes:
    """One whole answer of ``_app`` (``ok``, chunked: it gives no length)."""
    got = b""
    while not got.endswith(b"ok\r\n0\r\n\r\n"):
        chunk = sock.recv(1024)
        assert chunk, f"closed before the answer: {got!r}"
        got += chunk
    return got


@pytest.mark.parametrize("http", ["httptools", "h11"])
def test_a_connection_ends_after_its_requests_per_connection(http):
    with _server(http, header_timeout_s=5.0, requests_per_connection=3) as port:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(5)
        answers = []
        for _ in range(3):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            answers.append(_answer(sock))
        assert all(b" 200 " in a.split(b"\r\n")[0] for a in answers)
        assert not any(b"connection: close" in a.lower() for a in answers[:2])
        if http == "httptools":
            assert b"connection: close" in answers[2].lower()
        assert _closed_within(sock, 5), "the third request was the connection's last"
    with _server(http, header_timeout_s=5.0) as port:  # no limit: still open after ten
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(5)
        for _ in range(10):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            _answer(sock)
        assert not _closed_within(sock, 0.5)


def test_a_bad_timeout_or_protocol_is_refused():
    with pytest.raises(ValueError, match="positive"):
        http_protocol(0)
    with pytest.raises(ValueError, match="'auto', 'httptools' or 'h11'"):
        http_protocol(5, "zttp")
    with pytest.raises(ValueError, match="requests_per_connection"):
        http_protocol(5, requests_per_connection=-1)


class _Transport:
    """What a socket transport was asked to send, write by write."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.closed = self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.sent.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = self.aborted = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default=None):
        return ("127.0.0.1", 8090) if name == "sockname" else default


def test_the_writes_of_one_turn_of_the_loop_leave_in_one_send_in_their_order():
    from core.http_server import _OneSend

    async def run():
        real = _Transport()
        transport = _OneSend(real, asyncio.get_running_loop())
        transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        transport.write(b"ok")
        assert real.sent == [] and transport.get_write_buffer_size() == 40
        await asyncio.sleep(0)
        first = list(real.sent)
        transport.writelines([b"a", b"", b"b"])
        await asyncio.sleep(0)
        transport.write(b"last")
        transport.close()  # what is pending is sent before the connection closes
        transport.write(b"after close")
        await asyncio.sleep(0)
        extra = transport.get_extra_info("sockname")
        other = _Transport()
        aborted = _OneSend(other, asyncio.get_running_loop())
        aborted.write(b"never")
        aborted.abort()
        await asyncio.sleep(0)
        return first, real, extra, other

    first, real, extra, other = asyncio.run(run())
    assert first == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]
    assert real.sent == [*first, b"ab", b"last"] and real.closed
    assert extra == ("127.0.0.1", 8090)  # the transport's own
    assert other.sent == [] and other.aborted
