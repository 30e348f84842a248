"""``python -m core.healthcheck [COMMAND ...]``: does the service this container runs answer?

The project's image runs one of three long-lived processes, chosen by its command
(``python -m ingest``, ``python -m serving serve``, ``python -m speed_layer``). Its
``HEALTHCHECK`` reads that command from ``/proc/1/cmdline`` (or takes it as arguments),
asks that service on this host, at the address its ``WAP_*`` settings give it, and exits
0 when it answers 200, 1 otherwise: the collector's and serving's ``/health`` (503 while
Kafka or Cassandra is out of reach), the speed layer's ``/metrics``. A one-off command
(a dead-letter replay, a question to serving, a reset) has nothing to probe and exits 0.

>>> from core.settings import Settings
>>> target(["/usr/bin/tini", "--", "python", "-m", "serving", "serve"], Settings())
'http://127.0.0.1:8090/health'
>>> target(["python", "-m", "ingest", "replay-dead-letters", "--reason", "x"], Settings()) is None
True
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.settings import Settings, load_settings

__all__ = ["PROBES", "Probe", "answers", "main", "target"]


@dataclass(frozen=True)
class Probe:
    """How to ask one long-lived service whether it is healthy."""

    module: str
    """The package run with ``python -m``."""
    serves: Callable[[Sequence[str]], bool]
    """Whether these arguments (after the module) run the service, not a one-off command."""
    address: Callable[[Settings], tuple[str, int]]
    """Where the service listens, from the settings it reads."""
    path: str
    """The endpoint that answers 200 while the service is healthy."""


PROBES = (
    Probe(
        "ingest",
        lambda args: "replay-dead-letters" not in args,
        lambda s: (s.collector.host, s.collector.port),
        "/health",
    ),
    Probe(
        "serving",
        lambda args: "serve" in args,
        lambda s: (s.serving.host, s.serving.port),
        "/health",
    ),
    Probe(
        "speed_layer",
        lambda args: not {"--drain", "replay", "reset"} & set(args),
        lambda s: (s.speed.metrics_host, s.speed.metrics_port),
        "/metrics",
    ),
)
_WILDCARD = {"", "0.0.0.0", "::"}


def target(command: Sequence[str], settings: Settings) -> str | None:
    """The URL to probe for the process run by ``command``; None when it runs no service."""
    command = list(command)
    if "-m" not in command:
        return None
    at = command.index("-m")
    module, args = command[at + 1 : at + 2], command[at + 2 :]
    for probe in PROBES:
        if module == [probe.module] and probe.serves(args):
            host, port = probe.address(settings)
            host = "127.0.0.1" if host in _WILDCARD else host
            return f"http://{host}:{port}{probe.path}"
    return None


def answers(url: str, timeout_s: float = 4.0) -> tuple[bool, str]:
    """Whether ``url`` answers 200 within ``timeout_s``, and what it said."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return response.status == 200, f"{url}: {response.status}"
    except urllib.error.HTTPError as exc:
        return False, f"{url}: {exc.code} {exc.read(300).decode(errors='replace')}"
    except (urllib.error.URLError, OSError) as exc:
        return False, f"{url}: {getattr(exc, 'reason', exc)}"


def main(argv: Sequence[str]) -> int:
    command = list(argv) or [
        part.decode() for part in Path("/proc/1/cmdline").read_bytes().split(b"\0") if part
    ]
    url = target(command, load_settings())
    if url is None:
        print(f"nothing to probe: {' '.join(command)!r} runs no long-lived service")
        return 0
    healthy, said = answers(url)
    print(said)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
