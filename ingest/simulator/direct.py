"""Write simulated events straight into Kafka, exactly as the collector would.

Each message goes through the collector's own intake (enrichment, contract
validation, record encoding) with ``receivedAt`` set to the moment the
simulated request arrives (its true send time, no network), so the
skew-corrected ``timestamp`` equals the event's true time to the
millisecond. Used to load the log for tests, backfills and benchmarks
without HTTP in between; the HTTP path is :func:`ingest.simulator.send`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from core.settings import Settings
from ingest.simulator.events import SimEvent

__all__ = ["produce_direct", "produce_payloads"]


def produce_direct(
    events: Sequence[SimEvent], settings: Settings, source_id: str = "simulator"
) -> dict[str, int]:
    """Produce every message (invalid ones to the dead-letter topic); return the counts."""
    return produce_payloads([(e.payload, e.sent_at) for e in events], settings, source_id)


def produce_payloads(
    calls: Iterable[tuple[dict[str, Any], datetime]],
    settings: Settings,
    source_id: str = "simulator",
) -> dict[str, int]:
    """Produce each ``(call, received_at)`` as the collector would; return the counts.

    A call is one Segment call as a client sends it (any fields, custom
    properties and context included); ``received_at`` is when the collector
    receives it.
    """
    from confluent_kafka import Producer

    from ingest.enrich import RequestFacts
    from ingest.intake import Intake
    from ingest.producer import producer_config

    intake = Intake.of_collector(settings.collector)
    contract = intake.contract
    producer = Producer(producer_config(settings.kafka, settings.collector))
    failures: list[str] = []

    def on_delivery(error, _message) -> None:
        if error is not None:
            failures.append(str(error))

    counts = {"accepted": 0, "dead_lettered": 0}
    for call, received_at in calls:
        facts = RequestFacts(received_at, source_id, contract.version)
        routed = intake.route([call], facts)
        for topic, records, label in (
            (settings.kafka.events_topic, routed.accepted, "accepted"),
            (settings.kafka.dlq_topic, routed.dead_letters, "dead_lettered"),
        ):
            for record in records:
                producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    headers=record.headers,
                    on_delivery=on_delivery,
                )
                producer.poll(0)
                counts[label] += 1
    left = producer.flush(60)
    del producer  # destroy the client now: no reconnect attempts after we are done
    if left or failures:
        raise RuntimeError(f"Kafka did not take {left} record(s); errors: {failures[:3]}")
    return counts
