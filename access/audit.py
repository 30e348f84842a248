"""The audit log: one record per read of the serving API and per SQL statement.

Who (the identity's name, teams and how it was proved), when, what (the route
or ``statement``, the views it read, the statement's text with its literals
masked: :mod:`access.masking`), the outcome (``ok``, ``refused`` and why,
``failed``), the rows returned and how long it took. Each record is a
structured log line (logger ``audit``) and a message on ``kafka.audit_topic``,
which the SQL server lands in the ``audit`` Delta table only the platform's
admins can query (``audit_log``). Never a query's parameters: a key asked for
can be a person's search term.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, Literal

import orjson

from access.identity import Identity

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = ["AUDIT_FIELDS", "AuditLog", "AuditRecord", "Outcome", "read_records"]

Outcome = Literal["ok", "refused", "failed"]


@dataclass(frozen=True)
class AuditRecord:
    service: str
    """``serving`` or ``sql``."""
    identity: str
    teams: tuple[str, ...]
    source: str
    action: str
    """The route (``/v1/top``) or ``statement``."""
    outcome: Outcome
    reason: str | None = None
    """Why it was refused or failed (an error's class and message, masked)."""
    views: tuple[str, ...] = ()
    rows: int | None = None
    duration_ms: float = 0.0
    statement: str | None = None
    """The SQL text, literals masked."""
    at_ms: int = field(default_factory=lambda: int(time.time() * 1000))

    @classmethod
    def of(cls, identity: Identity, service: str, action: str, **rest: Any) -> AuditRecord:
        return cls(
            service, identity.name, tuple(sorted(identity.teams)), identity.source, action, **rest
        )

    def row(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in AUDIT_FIELDS}


AUDIT_FIELDS = tuple(AuditRecord.__dataclass_fields__)
"""The columns of the audit table, in order."""


class AuditLog:
    """Where a service's audit records go: its log, and the audit topic.

    The log line is the services' JSON line (:class:`core.log.JsonFormatter`'s fields:
    ``ts``, ``level``, ``logger``, ``event``, then the record's), written here rather than
    through :mod:`logging`, whose record, caller lookup and handler locks cost a serving
    request more than its answer does (``bench.access_cost``)."""

    def __init__(
        self, settings: Settings, *, kafka: bool = True, stream: IO[str] | None = None
    ) -> None:
        self.topic = settings.kafka.audit_topic
        self.stream = stream
        self.dropped = 0
        self._producer = None
        if kafka:
            from confluent_kafka import Producer

            self._producer = Producer(
                settings.kafka.client_config()
                | {"acks": "all", "enable.idempotence": True, "linger.ms": 100}
            )

    def record(self, record: AuditRecord) -> None:
        row = record.row()
        seconds, ms = divmod(record.at_ms, 1000)
        line = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z",
            "level": "info",
            "logger": "audit",
            "event": "audit",
        }
        (self.stream or sys.stderr).write(orjson.dumps(line | row).decode() + "\n")
        if self._producer is None:
            return
        try:
            self._producer.produce(self.topic, orjson.dumps(row))
            self._producer.poll(0)
        except BufferError:  # the log line above holds it; counted, said on /metrics
            self.dropped += 1

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)


def read_records(
    settings: Settings, identities: set[str], *, expected: int = 0, timeout_s: float = 60
) -> list[dict[str, Any]]:
    """The audit topic's records of ``identities``, read from its start: until ``expected``
    are found, or (with none expected) until the topic has been quiet for 3 s, or
    ``timeout_s``. For operators and tests; the admins query ``audit_log`` instead."""
    import uuid

    from confluent_kafka import Consumer

    consumer = Consumer(
        settings.kafka.client_config()
        | {"group.id": f"audit-reader-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([settings.kafka.audit_topic])
    found: list[dict[str, Any]] = []
    deadline, quiet = time.monotonic() + timeout_s, 0
    try:
        while time.monotonic() < deadline and (len(found) < expected or not expected):
            message = consumer.poll(1.0)
            if message is None:
                quiet += 1
                if not expected and quiet >= 3 and found:
                    break
                continue
            quiet = 0
            if message.error():
                continue
            record = orjson.loads(message.value())
            if record["identity"] in identities:
                found.append(record)
    finally:
        consumer.close()
    return found
