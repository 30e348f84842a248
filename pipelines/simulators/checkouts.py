"""The checkout service, simulated: orders and refunds produced straight to Kafka.

:func:`generate` makes a reproducible stream of ``checkouts`` records (contract
``data_contracts/checkouts``) with the faults a real producer has: retries
that produce an event twice, events produced long after they happened (late),
out of order, and broken records (not JSON, no ``event_id``, no ``timestamp``,
a ``timestamp`` in the future). :func:`build_truth` is what a correct pipeline
must answer for them; :func:`produce` writes them with confluent-kafka
(idempotent, ``acks=all``, keyed by buyer) as the service would.

``python -m pipelines.simulators.checkouts --events 2000`` sends live traffic.

>>> records = generate(CheckoutConfig(seed=1, events=50, invalid_rate=0.1))
>>> truth = build_truth(records)
>>> truth.valid_events + truth.invalid == truth.distinct_records
True
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "CheckoutConfig",
    "CheckoutTruth",
    "Record",
    "build_truth",
    "generate",
    "orders_of_visits",
    "produce",
]

DEFECTS = ("not_json", "missing:event_id", "missing:timestamp", "invalid:timestamp_future")
"""How a broken record is broken; the speed layer and silver reject each with this reason
(``unparseable`` for ``not_json``)."""


@dataclass(frozen=True)
class CheckoutConfig:
    """What to simulate: how many events, from when, how fast, with which faults."""

    seed: int = 7
    events: int = 1000
    start: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(hours=1))
    rate: float = 5.0
    """Events per second of simulated time."""
    buyers: int = 300
    currencies: tuple[str, ...] = ("EUR", "USD", "GBP")
    refund_rate: float = 0.05
    duplicate_rate: float = 0.03
    late_rate: float = 0.05
    late_by_s: int = 900
    out_of_order_rate: float = 0.05
    invalid_rate: float = 0.02
    source_id: str = "checkout-service"


@dataclass(frozen=True)
class Record:
    """One Kafka record as produced: key, value, the event it carries (None when broken)."""

    key: bytes
    value: bytes
    event: dict[str, Any] | None
    defect: str | None = None
    duplicate: bool = False
    at: datetime | None = None
    """When the service produced it (its ``receivedAt``)."""


def _items(rng: random.Random) -> tuple[list[dict[str, Any]], int]:
    items = [
        {
            "sku": f"sku-{rng.randrange(200):03d}",
            "quantity": rng.randint(1, 4),
            "unit_price_minor": rng.choice((499, 999, 1999, 4999, 12900)),
        }
        for _ in range(rng.randint(1, 4))
    ]
    return items, sum(i["quantity"] * i["unit_price_minor"] for i in items)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def generate(config: CheckoutConfig) -> list[Record]:
    """The records the service produces, in produce order: a late event comes into the log
    after events that happened after it."""
    rng = random.Random(config.seed)
    completed: list[dict[str, Any]] = []
    records: list[Record] = []
    for n in range(config.events):
        happened = config.start + timedelta(seconds=n / config.rate)
        produced = happened
        if rng.random() < config.late_rate:
            produced = happened + timedelta(seconds=config.late_by_s)
        elif rng.random() < config.out_of_order_rate:
            happened -= timedelta(seconds=rng.uniform(1, 120))
        if completed and rng.random() < config.refund_rate:
            order = rng.choice(completed)
            event = {
                "type": "order_refunded",
                "order_id": order["order_id"],
                "buyer_id": order["buyer_id"],
                "amount_minor": rng.randint(1, order["amount_minor"]),
                "currency": order["currency"],
            }
        else:
            items, total = _items(rng)
            event = {
                "type": "order_completed",
                "order_id": f"o-{uuid.UUID(int=rng.getrandbits(128)).hex[:16]}",
                "buyer_id": f"buyer-{rng.randrange(config.buyers):04d}",
                "amount_minor": total,
                "currency": rng.choice(config.currencies),
                "items": items,
            }
            completed.append(event)
        event = {
            "event_id": str(uuid.UUID(int=rng.getrandbits(128))),
            "source_id": config.source_id,
            **event,
            "timestamp": _stamp(happened),
            "receivedAt": _stamp(produced),
        }
        key = event["buyer_id"].encode()
        if rng.random() < config.invalid_rate:
            records.append(_broken(rng, event, key, produced))
            continue
        record = Record(key, json.dumps(event).encode(), event, at=produced)
        records.append(record)
        if rng.random() < config.duplicate_rate:
            records.append(Record(key, record.value, event, duplicate=True, at=produced))
    return sorted(records, key=lambda r: r.at or config.start)


def orders_of_visits(
    web_events: Iterable[Any], source_id: str = "checkout-service"
) -> list[Record]:
    """The orders the checkout service records for the website's checkouts: one
    ``order_completed`` per ``Order Completed`` call of the web simulator's traffic
    (:class:`ingest.simulator.SimulatorConfig` ``checkout_rate``), under the same order id,
    bought by the call's ``userId`` at the call's true time. The service records the order
    even when the site's call is lost or broken on the way."""
    records, seen = [], set()
    for event in web_events:
        call = event.payload if isinstance(event.payload, dict) else {}
        properties = call.get("properties") or {}
        order_id, buyer = properties.get("order_id"), call.get("userId")
        if call.get("event") != "Order Completed" or not buyer or order_id in seen:
            continue
        seen.add(order_id)
        amount = properties["revenue_minor"]
        order = {
            "event_id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"order/{order_id}")),
            "source_id": source_id,
            "type": "order_completed",
            "order_id": order_id,
            "buyer_id": buyer,
            "amount_minor": amount,
            "currency": properties["currency"],
            "items": [{"sku": "sku-web", "quantity": 1, "unit_price_minor": amount}],
            "timestamp": _stamp(event.time),
            "receivedAt": _stamp(event.time),
        }
        records.append(Record(buyer.encode(), json.dumps(order).encode(), order, at=event.time))
    return records


def _broken(rng: random.Random, event: dict[str, Any], key: bytes, at: datetime) -> Record:
    defect = rng.choice(DEFECTS)
    broken = dict(event)
    if defect == "not_json":
        return Record(key, b'{"type": "order_completed", "amount_minor": ', None, defect, at=at)
    if defect == "missing:event_id":
        del broken["event_id"]
    elif defect == "missing:timestamp":
        del broken["timestamp"]
    else:
        broken["timestamp"] = _stamp(at + timedelta(days=2))
    return Record(key, json.dumps(broken).encode(), None, defect, at=at)


@dataclass
class Minute:
    """The expected values of ``orders_by_currency`` for one (minute, currency)."""

    orders: int = 0
    refunds: int = 0
    revenue_minor: int = 0
    buyers: set[str] = field(default_factory=set)
    order_values: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class CheckoutTruth:
    """What a correct pipeline answers: per ``(minute, currency)``, and the counts."""

    distinct_records: int
    valid_events: int
    invalid: int
    duplicates: int
    by_minute: dict[tuple[str, str], Minute]
    buyers: frozenset[str]

    def totals(self) -> dict[str, int]:
        """Orders, refunds and revenue over the whole run."""
        minutes = self.by_minute.values()
        return {
            "orders": sum(m.orders for m in minutes),
            "refunds": sum(m.refunds for m in minutes),
            "revenue_minor": sum(m.revenue_minor for m in minutes),
        }


def _minute(stamp: str) -> str:
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return at.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:00Z")


def build_truth(records: list[Record], forgotten: frozenset[str] = frozenset()) -> CheckoutTruth:
    """The ground truth of ``records``: each event once (by ``(source_id, event_id)``), broken
    records left out, events of ``forgotten`` buyers left out."""
    seen: set[tuple[str, str]] = set()
    by_minute: dict[tuple[str, str], Minute] = defaultdict(Minute)
    invalid = duplicates = valid = 0
    for record in records:
        if record.event is None:
            invalid += 1
            continue
        event = record.event
        identity = (event["source_id"], event["event_id"])
        if identity in seen:
            duplicates += 1
            continue
        seen.add(identity)
        if event["buyer_id"] in forgotten:
            continue
        valid += 1
        cell = by_minute[_minute(event["timestamp"]), event["currency"]]
        if event["type"] == "order_completed":
            cell.orders += 1
            cell.revenue_minor += event["amount_minor"]
            cell.buyers.add(event["buyer_id"])
            cell.order_values.append(event["amount_minor"])
        else:
            cell.refunds += 1
            cell.revenue_minor -= event["amount_minor"]
    buyers = frozenset(b for m in by_minute.values() for b in m.buyers)
    return CheckoutTruth(len(seen) + invalid, valid, invalid, duplicates, dict(by_minute), buyers)


def produce(records: list[Record], bootstrap: dict[str, str], topic: str) -> int:
    """Produce ``records`` to ``topic`` in order (idempotent, ``acks=all``); how many.

    ``bootstrap`` is the client configuration (``KafkaSettings.client_config()``).
    """
    from confluent_kafka import Producer

    producer = Producer({**bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 20})
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    for record in records:
        while True:
            try:
                producer.produce(topic, value=record.value, key=record.key, on_delivery=on_delivery)
                break
            except BufferError:  # the client's queue is full: let deliveries drain it
                producer.poll(0.5)
        producer.poll(0)
    left = producer.flush(60)
    if left or failures:
        raise RuntimeError(f"Kafka did not take {left} record(s); errors: {failures[:3]}")
    return len(records)


def main(argv: list[str] | None = None) -> int:
    """Send simulated checkout traffic to the ``checkouts`` pipeline's topic."""
    from core.settings import load_settings
    from pipelines import pipeline

    parser = argparse.ArgumentParser(prog="python -m pipelines.simulators.checkouts")
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--minutes-ago", type=float, default=30.0)
    args = parser.parse_args(argv)
    settings = load_settings()
    start = datetime.now(UTC) - timedelta(minutes=args.minutes_ago)
    records = generate(CheckoutConfig(seed=args.seed, events=args.events, start=start))
    topic = pipeline("checkouts").topic_of(settings)
    sent = produce(records, settings.kafka.client_config(), topic)
    truth = build_truth(records)
    print(json.dumps({"topic": topic, "records": sent, **truth.totals()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
