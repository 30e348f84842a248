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

import time
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import orjson

from access.identity import Identity
from core.log import get_logger, log_event

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = ["AUDIT_FIELDS", "AuditLog", "AuditRecord", "Outcome"]

_log = get_logger("audit")

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
        return asdict(self)


AUDIT_FIELDS = tuple(AuditRecord.__dataclass_fields__)
"""The columns of the audit table, in order."""


class AuditLog:
    """Where a service's audit records go: its log, and the audit topic."""

    def __init__(self, settings: Settings, *, kafka: bool = True) -> None:
        self.topic = settings.kafka.audit_topic
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
        log_event(_log, "audit", **row)
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
