"""The speed benchmarks' traffic: collector-shaped records from a few templates, produced
at a fixed rate, with when each view's minute reached each running total (``Produced``),
so that a view's lag can be read off the totals it shows."""

from __future__ import annotations

import bisect
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from core.settings import Settings

__all__ = ["Produced", "Template", "produce_at", "templates"]

_ID = b"BENCHID-0000000000000000"
_TS = "2000-01-01T00:00:00.000Z"


# -- events -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    counts: dict[str, int]
    """What one such event adds to each view's measure."""


def templates(pages: int = 200) -> list[Template]:
    """One record per page view, click and search, made by the collector's intake."""
    from data_contracts import load_contract
    from data_contracts.derive import compile_fast_validator
    from ingest.enrich import RequestFacts
    from ingest.intake import Intake

    contract = load_contract("web_events", 1)
    intake = Intake(contract, compile_fast_validator(contract), 32 * 1024)
    moment = datetime.fromisoformat(_TS)
    facts = RequestFacts(moment, "bench", contract.version)
    calls: list[tuple[dict, dict[str, int]]] = []
    for n in range(pages):
        path = f"/bench/{n}"
        context = {"page": {"url": f"https://shop.example{path}", "path": path}}
        user = {"anonymousId": f"visitor-{n % 97}"}
        calls.append(
            (
                {"type": "page", "properties": {"path": path, "load_time_ms": 100 + n}}
                | {"context": context, **user},
                {"events": 1, "page_views": 1},
            )
        )
        if n % 4 == 0:
            clicked = {"element": f"button#b{n % 10}", "target": f"/bench/{(n + 1) % pages}"}
            calls.append(
                (
                    {"type": "track", "event": "Element Clicked", "properties": clicked}
                    | {"context": context, **user},
                    {"events": 1, "clicks": 1},
                )
            )
        if n % 8 == 0:
            search = {"query": f"term {n % 25}", "results_count": n % 7}
            calls.append(
                (
                    {"type": "track", "event": "Site Searched", "properties": search}
                    | {"context": context, **user},
                    {"events": 1, "searches": 1},
                )
            )
    made = []
    for call, counts in calls:
        call = call | {"messageId": _ID.decode(), "timestamp": _TS}
        routed = intake.route([call], facts)
        if routed.rejections:
            raise RuntimeError(f"bench template rejected: {routed.rejections[0].as_dict()}")
        (record,) = routed.accepted
        made.append(Template(record.key, record.value, record.headers, counts))
    return made


# -- producing at a rate, and what was produced when -------------------------------------------


@dataclass
class Produced:
    """Per minute and measure: (monotonic time, cumulative count) after each tick. One for a
    whole run: the views' rows of a minute hold every step's events of that minute, so its
    counts must too (a step's own would read as reflected while the step before's were)."""

    times: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))
    totals: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(list))
    events: int = 0

    def oldest_unreflected(self, minute: str, measure: str, seen: int) -> float | None:
        """Monotonic time the first event not in ``seen`` was produced; None: all reflected."""
        totals = self.totals.get((minute, measure))
        if not totals or seen >= totals[-1]:
            return None
        return self.times[(minute, measure)][bisect.bisect_right(totals, seen)]


def produce_at(
    settings: Settings,
    made: list[Template],
    rate: float,
    seconds: float,
    produced: Produced,
    lock: threading.Lock,
    run: str,
    sequence: list[int],
) -> None:
    """Produce ``rate`` events/s for ``seconds`` in 10 ms ticks (event time = send time)."""
    from confluent_kafka import Producer

    from ingest.producer import producer_config

    producer = Producer(producer_config(settings.kafka, settings.collector))
    topic = settings.kafka.events_topic
    tick = 0.01
    started = time.monotonic()
    due = 0.0
    running: dict[tuple[str, str], int] = defaultdict(int)
    while (elapsed := time.monotonic() - started) < seconds:
        target = rate * (elapsed + tick)
        now = datetime.now(UTC)
        stamp = now.isoformat(timespec="milliseconds")[:-6] + "Z"
        minute = stamp[:16]
        while due < target:
            n = sequence[0]
            sequence[0] += 1
            t = made[n % len(made)]
            event_id = f"{run}-{n:015d}".encode()[: len(_ID)].ljust(len(_ID), b"0")
            value = t.value.replace(_ID, event_id).replace(_TS.encode(), stamp.encode())
            headers = [(k, event_id if k == "event_id" else v) for k, v in t.headers]
            while True:
                try:
                    producer.produce(topic, value=value, key=t.key, headers=headers)
                    break
                except BufferError:
                    producer.poll(0.01)
            for measure, count in t.counts.items():
                key = (minute, measure)
                if key not in running:  # a minute an earlier step began: count on from it
                    earlier = produced.totals.get(key)
                    running[key] = earlier[-1] if earlier else 0
                running[key] += count
            due += 1
        producer.poll(0)
        mark = time.monotonic()
        with lock:
            for (m, measure), total in running.items():
                if m == minute:
                    totals = produced.totals[(m, measure)]
                    if not totals or totals[-1] != total:
                        produced.times[(m, measure)].append(mark)
                        totals.append(total)
            produced.events = sequence[0]
        time.sleep(max(0.0, started + elapsed + tick - time.monotonic()))
    producer.flush(60)


# -- observing the views ----------------------------------------------------------------------


def _minutes_back(now: datetime, n: int) -> list[datetime]:
    first = now.replace(second=0, microsecond=0)
    return [first - timedelta(minutes=i) for i in range(n)]
