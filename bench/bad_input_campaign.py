"""Bad-input campaign: the running collector under a flood of malformed and hostile requests.

Brings up what is missing of Kafka, Cassandra, the collector and the speed
layer (``platformctl.platform.up``), then sends ``--requests`` requests to the
collector from ``--processes`` processes with ``--concurrency`` requests in
flight each, mixing: random bytes, truncated JSON, deep nesting, huge batches
(just under and over 500 KB, garbage and too many calls), bad, missing and
malformed auth, gzip/deflate bodies and bogus encodings, lone surrogates and
invalid UTF-8, extreme numbers, extreme and malformed dates (calendar ends,
offsets, leap seconds, ``sentAt`` far off), wrong types for every field, wrong
endpoints and methods, empty bodies, and a share of valid events.

A line of progress goes to stderr every few seconds. Afterwards it waits (up
to a minute) for the speed layer to process what was sent and reads each
view's watermark from ``<keyspace>.speed_progress``: a watermark ahead of now
by more than the event-time tolerance (``core.event_time``) is a failure.

Reports JSON on stdout and a table on stderr: requests, answers by status
code, 5xx, unanswered (timeouts, connection errors), wall time, requests/s,
the watermarks. Exits 1 if any answer was a 5xx, any request went
unanswered or a watermark is ahead.

    .venv/bin/python -m bench.bad_input_campaign --requests 100000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import sys
import time
from collections import Counter
from datetime import UTC, datetime

import httpx

from bench.hostile_inputs import Forge
from core.event_time import EventTimeBounds
from core.settings import Settings, load_settings
from platformctl import platform

SERVICES = ("kafka", "cassandra", "collector", "speed")


def _worker(index: int, count: int, seed: int, url: str, key: str, args: dict, live, out) -> None:
    """One process: ``count`` shots, ``concurrency`` in flight; its tally goes on ``out``."""
    forge = Forge(seed, key)
    tally = {"status": Counter(), "kind": Counter(), "unanswered": Counter(), "examples": []}

    async def run() -> None:
        remaining = iter(range(count))
        limits = httpx.Limits(
            max_connections=args["concurrency"], max_keepalive_connections=args["concurrency"]
        )
        async with httpx.AsyncClient(
            base_url=url, timeout=args["timeout"], limits=limits
        ) as client:

            async def lane() -> None:
                for _ in remaining:
                    shot = forge.shot()
                    try:
                        answer = await client.request(
                            shot.method, shot.path, headers=shot.headers, content=shot.body
                        )
                        status = str(answer.status_code)
                    except (httpx.LocalProtocolError, httpx.InvalidURL) as exc:
                        status = "not_sent"  # refused by the client library: a campaign bug
                        tally["unanswered"][f"not sent: {type(exc).__name__}: {exc}"] += 1
                    except httpx.HTTPError as exc:
                        status = "unanswered"
                        tally["unanswered"][type(exc).__name__] += 1
                        live[index * 3 + 2] += 1
                    tally["status"][status] += 1
                    tally["kind"][f"{shot.kind} {status}"] += 1
                    live[index * 3] += 1
                    if status == "unanswered" or status.startswith("5"):
                        live[index * 3 + 1] += status != "unanswered"
                        if len(tally["examples"]) < 10:
                            text = answer.text[:300] if status != "unanswered" else ""
                            tally["examples"].append(
                                {
                                    "kind": shot.kind,
                                    "method": shot.method,
                                    "path": shot.path[:200],
                                    "headers": shot.headers,
                                    "body": shot.body[:300].decode("utf-8", "replace"),
                                    "status": status,
                                    "answer": text,
                                }
                            )

            await asyncio.gather(*(lane() for _ in range(args["concurrency"])))

    asyncio.run(run())
    out.put({k: dict(v) if isinstance(v, Counter) else v for k, v in tally.items()})


def _speed_watermarks(settings: Settings, since: datetime, wait_s: float) -> dict:
    """Each view's progress once it reported a micro-batch after ``since`` with no lag left."""
    deadline = time.monotonic() + wait_s
    while True:
        progress = platform.speed_progress(settings)
        beats = {v: r.get("heartbeat_at") for v, r in progress.items()}
        caught_up = bool(progress) and all(
            b is not None and b.replace(tzinfo=UTC) > since and not progress[v].get("kafka_lag")
            for v, b in beats.items()
        )
        if caught_up or time.monotonic() > deadline:
            break
        time.sleep(2)
    now = datetime.now(UTC)
    bounds = EventTimeBounds.from_settings(settings)
    views = {}
    for view, row in sorted(progress.items()):
        mark, newest = row.get("watermark"), row.get("max_event_time")
        mark = mark.replace(tzinfo=UTC) if mark else None
        views[view] = {
            "watermark": mark.isoformat() if mark else None,
            "max_event_time": newest.replace(tzinfo=UTC).isoformat() if newest else None,
            "kafka_lag": row.get("kafka_lag"),
            "watermark_ok": mark is None or not bounds.is_ahead(mark, now),
        }
    return {"caught_up": caught_up, "checked_at": now.isoformat(), "views": views}


def _table(report: dict) -> str:
    lines = [
        f"requests      {report['requests']:>10}",
        f"wall time     {report['wall_s']:>10.1f} s",
        f"requests/s    {report['requests_per_s']:>10.0f}",
        f"5xx           {report['5xx']:>10}",
        f"unanswered    {report['unanswered']:>10}",
        f"not sent      {report['not_sent']:>10}  (refused by the client library)",
        "by status:",
        *(f"  {s:<12}{n:>10}" for s, n in sorted(report["by_status"].items())),
        f"speed layer caught up: {report['speed']['caught_up']}",
        *(
            f"  {v:<22} watermark {r['watermark']}  newest {r['max_event_time']}  "
            f"{'ok' if r['watermark_ok'] else 'AHEAD OF NOW'}"
            for v, r in report["speed"]["views"].items()
        ),
        f"verdict: {'PASS' if report['ok'] else 'FAIL'}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--processes", type=int, default=2, help="sending processes")
    parser.add_argument(
        "--concurrency", type=int, default=32, help="requests in flight per process"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds before a request counts as unanswered"
    )
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument(
        "--speed-wait", type=float, default=60.0, help="seconds to wait for the speed layer"
    )
    args = parser.parse_args(argv)

    settings = load_settings()
    timings = platform.up(settings, SERVICES)
    print(f"[campaign] services up: {timings}", file=sys.stderr, flush=True)
    host = "127.0.0.1" if settings.collector.host == "0.0.0.0" else settings.collector.host
    url = f"http://{host}:{settings.collector.port}"
    key = next(iter(settings.collector.source_of()))

    ctx = mp.get_context("spawn")
    live = ctx.Array("q", 3 * args.processes, lock=False)  # per process: sent, 5xx, unanswered
    out = ctx.Queue()
    shares = [
        args.requests // args.processes + (i < args.requests % args.processes)
        for i in range(args.processes)
    ]
    options = {"concurrency": args.concurrency, "timeout": args.timeout}
    started = time.monotonic()
    workers = [
        ctx.Process(target=_worker, args=(i, n, args.seed + i, url, key, options, live, out))
        for i, n in enumerate(shares)
    ]
    for w in workers:
        w.start()
    tallies = []
    while len(tallies) < len(workers):
        try:
            tallies.append(out.get(timeout=5))
        except Exception:  # queue.Empty: time for a progress line
            if not any(w.is_alive() for w in workers) and out.empty():
                break
        sent = sum(live[0::3])
        elapsed = time.monotonic() - started
        print(
            f"[campaign] {elapsed:6.0f}s  sent {sent:>7}/{args.requests}  {sent / elapsed:6.0f}/s  "
            f"5xx {sum(live[1::3])}  unanswered {sum(live[2::3])}",
            file=sys.stderr,
            flush=True,
        )
    wall = time.monotonic() - started
    for w in workers:
        w.join(30)
    ended = datetime.now(UTC)

    status, kinds, unanswered, examples = Counter(), Counter(), Counter(), []
    for t in tallies:
        status.update(t["status"])
        kinds.update(t["kind"])
        unanswered.update(t["unanswered"])
        examples += t["examples"]
    not_sent = status.pop("not_sent", 0)
    sent = sum(status.values())
    fives = sum(n for s, n in status.items() if s.startswith("5"))
    print(
        f"[campaign] waiting up to {args.speed_wait:.0f}s for the speed layer",
        file=sys.stderr,
        flush=True,
    )
    speed = _speed_watermarks(settings, ended, args.speed_wait)
    report = {
        "requests": sent,
        "requests_planned": args.requests,
        "by_status": dict(sorted(status.items())),
        "by_kind": {k: kinds[k] for k in sorted(kinds)},
        "5xx": fives,
        "unanswered": status.get("unanswered", 0) + (args.requests - sent - not_sent),
        "not_sent": not_sent,
        "unanswered_by_error": dict(unanswered),
        "wall_s": round(wall, 1),
        "requests_per_s": round(sent / wall, 1),
        "failures": examples,
        "speed": speed,
        "command": " ".join(
            [".venv/bin/python -m bench.bad_input_campaign", *(argv or sys.argv[1:])]
        ),
    }
    report["ok"] = (
        report["5xx"] == 0
        and report["unanswered"] == 0
        and all(v["watermark_ok"] for v in speed["views"].values())
    )
    print(json.dumps(report, indent=2, default=str))
    print(_table(report), file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
