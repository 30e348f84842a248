"""What knowing who asks costs a serving worker: identity, grants and the audit record per
request, against the same worker answering without them, in one run.

The app of one worker on :class:`bench.serving_hot_path.MemoryStore` (no
Cassandra; every answer after the first of its question is shared, as almost
all of a dashboard's are), asked the dashboard's mix of requests on the ASGI
app directly, rounds alternating, the median round of each:

- **open**: a gate that takes every credential for an admin without looking
  at it and keeps no record: what a request costs with no identity, grant or
  audit (the engine alone);
- **issued token**: the caller's own token (an issued one: its id looked up,
  its SHA-256 compared), the view checked against its teams' grants, and an
  audit record written as in production: a JSON log line (here to
  ``/dev/null``) and, with
  ``--kafka`` (the platform's Kafka up), a message on the audit topic.

Both paths of the app are measured: the hot path (kept answers, in front of
FastAPI) and the framework path. The difference per request is the cost of
access; the target is under 0.1 ms.

    .venv/bin/python -m bench.access_cost            # ~30 s, no platform needed
    .venv/bin/python -m bench.access_cost --kafka    # with the audit topic (make up)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import AsyncExitStack
from datetime import UTC, datetime

from access import Directory, Identity
from access.audit import AuditLog
from access.store import Issued
from access.tokens import new_token
from bench.serving_hot_path import MemoryStore, _call, _dashboard, _scope, _settings
from core.settings import load_settings
from pipelines.teams import ADMINS
from serving.gate import Gate

__all__ = ["main"]


class _Open(Gate):
    """No identity, no grants, no audit: every credential is an admin's."""

    _ADMIN = Identity("bench", frozenset({ADMINS}), "service")

    def identify(self, credential: str | None) -> Identity | None:
        return self._ADMIN

    def record(self, *args, **kwargs) -> None:
        return None


class _Issued:
    """The token table, holding the one token the bench asks with."""

    def __init__(self) -> None:
        token, now = new_token(), datetime.now(UTC)
        self.text = token.text
        self.row = Issued(
            token.id, token.digest, "bench-analyst", frozenset({"web-analytics"}), now, None, None
        )

    def all(self) -> list[Issued]:
        return [self.row]


async def _costs(rounds: int, requests: int, kafka: bool) -> dict:
    from serving.app import create_app
    from serving.query import Queries

    settings = load_settings()
    issued = _Issued()
    directory = Directory(settings, issued)  # type: ignore[arg-type]
    directory.refresh()
    devnull = open(os.devnull, "w")  # noqa: SIM115 - the audit lines, written nowhere
    audit = AuditLog(settings, kafka=kafka, stream=devnull)
    queries = Queries(MemoryStore(int(time.time() * 1000)))
    apps = {}
    for hot in (True, False):
        apps[("open", hot)] = create_app(_settings(hot), queries, _Open(directory, None))
        apps[("issued token", hot)] = create_app(_settings(hot), queries, Gate(directory, audit))
    scopes = [_scope(path) for path in _dashboard()]
    for scope in scopes:
        scope["headers"] = [
            (b"host", b"127.0.0.1"),
            (b"authorization", f"Bearer {issued.text}".encode()),
        ]
    costs: dict[tuple[str, bool], list[float]] = {key: [] for key in apps}
    async with AsyncExitStack() as running:
        for app in apps.values():
            await running.enter_async_context(app.router.lifespan_context(app))
        for scope in scopes:  # every question computed once, then shared
            status = await _call(apps[("issued token", False)], scope)
            if status != 200:
                raise RuntimeError(f"{scope['path']}?{scope['query_string']!r}: {status}")
        for _ in range(rounds):
            for key, app in apps.items():
                started = time.process_time()
                for i in range(requests):
                    await _call(app, scopes[i % len(scopes)])
                costs[key].append((time.process_time() - started) / requests * 1e6)
    audit.close()
    devnull.close()
    return {key: statistics.median(c) for key, c in costs.items()} | {"dropped": audit.dropped}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.access_cost", description=__doc__)
    parser.add_argument("--rounds", type=int, default=9, help="rounds per app")
    parser.add_argument("--requests", type=int, default=2000, help="requests per round")
    parser.add_argument("--kafka", action="store_true", help="audit records to the topic too")
    args = parser.parse_args(argv)

    import uvloop

    print(f"load average before: {os.getloadavg()[0]:.2f}", flush=True)
    found = uvloop.run(_costs(args.rounds, args.requests, args.kafka))
    for hot in (True, False):
        path = "hot path" if hot else "framework"
        plain, checked = found[("open", hot)], found[("issued token", hot)]
        print(
            f"{path:<9} CPU per shared dashboard request: open {plain:.1f} µs, issued token "
            f"with grants and audit {checked:.1f} µs: access costs {checked - plain:.1f} µs "
            f"({checked / plain:.2f}x)",
            flush=True,
        )
    print(f"audit records to Kafka: {'yes' if args.kafka else 'no'}, dropped {found['dropped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
