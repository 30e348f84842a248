"""A slow-loris client: connections that send half a request and then nothing."""

from __future__ import annotations

import socket
import time

__all__ = ["seconds_until_closed"]

PARTIAL_REQUEST = b"POST /v1/batch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le"


def seconds_until_closed(port: int, connections: int = 5, give_up_s: float = 30.0) -> float:
    """Open ``connections`` to ``127.0.0.1:port``, each sending half a request's headers;
    the seconds until the server has closed the last one. Fails (AssertionError) when one is
    still open after ``give_up_s``."""
    sockets = []
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(PARTIAL_REQUEST)
        sockets.append(sock)
    started = time.monotonic()
    try:
        for n, sock in enumerate(sockets):
            sock.settimeout(max(0.1, give_up_s - (time.monotonic() - started)))
            try:
                while sock.recv(4096):  # an error answer (408) may come before the close
                    pass
            except ConnectionResetError:
                pass
            except TimeoutError:
                raise AssertionError(
                    f"connection {n + 1} of {connections} with half a request sent is still "
                    f"open after {give_up_s:.0f} s: the server has no header-read timeout"
                ) from None
    finally:
        for sock in sockets:
            sock.close()
    return time.monotonic() - started
