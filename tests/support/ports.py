"""Free local ports for services a test starts."""

from __future__ import annotations

import socket

__all__ = ["free_port", "free_port_block"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the OS picks it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def free_port_block(size: int, attempts: int = 200) -> int:
    """The first of ``size`` consecutive TCP ports on 127.0.0.1 nothing listens on now (a
    local Kafka cluster's nodes listen on node 1's ports plus 2 and 4)."""
    for _ in range(attempts):
        first = free_port()
        if first + size - 1 <= 65535 and all(
            _free(port) for port in range(first + 1, first + size)
        ):
            return first
    raise RuntimeError(f"no {size} consecutive free ports found in {attempts} attempts")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
