"""From the raw calls of one request to Kafka records: enrich, validate, route.

Every event ends in exactly one place: an accepted record for the events
topic, or a dead letter (original payload + reason) for the dead-letter
topic. Nothing is dropped.

An event nested deeper than ``max_depth`` levels is dead-lettered as
``invalid:too_deep`` before anything walks it recursively; its letter keeps
the payload down to that depth (deeper values become ``"<too deep>"``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from data_contracts import Contract
from data_contracts.derive import ValidationFailure
from ingest.enrich import EnrichError, RequestFacts, enrich_with_adjustment, format_ts

__all__ = ["Intake", "Record", "Rejection", "Routed"]


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record, ready to produce."""

    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why one event of a request was not accepted."""

    index: int
    message_id: str | None
    reason: str
    detail: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "messageId": self.message_id,
            "reason": self.reason,
            "detail": self.detail,
        }


@dataclass
class Routed:
    """The outcome of one request's events."""

    accepted: list[Record] = field(default_factory=list)
    dead_letters: list[Record] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    clamped: int = 0
    """Accepted events whose time lay in the future and was clamped to ``receivedAt``."""


class Intake:
    """Enrich, validate and encode events against one contract version."""

    def __init__(
        self,
        contract: Contract,
        validate: Callable[[dict[str, Any]], None],
        max_event_bytes: int,
        max_depth: int = 64,
    ) -> None:
        self.contract = contract
        self._validate = validate
        self._max_event_bytes = max_event_bytes
        self._max_depth = max_depth
        self._contract_header = contract.ref.encode()

    def route(self, events: list[Any], facts: RequestFacts) -> Routed:
        routed = Routed()
        for index, event in enumerate(events):
            try:
                record, adjustment = self._accept(event, facts, index)
            except (EnrichError, ValidationFailure) as exc:
                message_id = event.get("messageId") if isinstance(event, dict) else None
                rejection = Rejection(
                    index,
                    message_id if isinstance(message_id, str) else None,
                    exc.reason,
                    exc.detail,
                )
                routed.rejections.append(rejection)
                routed.dead_letters.append(self._dead_letter(event, rejection, facts))
            else:
                routed.accepted.append(record)
                routed.clamped += adjustment is not None
        return routed

    def _accept(self, event: Any, facts: RequestFacts, position: int) -> tuple[Record, str | None]:
        if not isinstance(event, dict):
            raise EnrichError(
                "invalid:event", f"an event must be a JSON object, got {_kind(event)}"
            )
        if _deeper_than(event, self._max_depth):
            raise EnrichError(
                "invalid:too_deep",
                f"the event nests objects or arrays more than {self._max_depth} levels deep",
            )
        enriched, adjustment = enrich_with_adjustment(event, facts, position)
        try:
            value = orjson.dumps(enriched)
        except TypeError as exc:  # e.g. lone surrogates in a string
            raise EnrichError("invalid:encoding", f"the event cannot be encoded: {exc}") from None
        if len(value) > self._max_event_bytes:
            raise EnrichError(
                "too_large",
                f"event is {len(value)} bytes; the limit is {self._max_event_bytes} bytes",
            )
        self._validate(enriched)
        user = enriched.get("userId") or enriched.get("anonymousId")
        headers = [
            ("content-type", b"application/json"),
            ("contract", self._contract_header),
            ("source_id", facts.source_id.encode()),
            ("event_id", str(enriched["event_id"]).encode()),
        ]
        if adjustment is not None:
            headers.append(("timestamp_adjusted", adjustment.encode()))
        key = str(user).encode() if user is not None else None
        return Record(key=key, value=value, headers=headers), adjustment

    def _dead_letter(self, event: Any, rejection: Rejection, facts: RequestFacts) -> Record:
        letter = {
            "payload": event,
            "reason": rejection.reason,
            "detail": rejection.detail,
            "contract": self.contract.ref,
            "received_at": format_ts(facts.received_at),
            "source_id": facts.source_id,
        }
        try:
            value = orjson.dumps(letter, default=repr)
        except TypeError:  # not valid UTF-8, too deep for orjson, or an int beyond 64 bits
            letter["payload"] = _pruned(event, self._max_depth)
            value = json.dumps(letter, default=repr, ensure_ascii=True).encode()
        key = (
            rejection.message_id.encode("utf-8", "backslashreplace")
            if rejection.message_id
            else None
        )
        return Record(
            key=key,
            value=value,
            headers=[
                ("content-type", b"application/json"),
                ("contract", self._contract_header),
                ("reason", rejection.reason.encode()),
            ],
        )


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests dicts and lists more than ``limit`` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if type(node) is dict else node
        stack.extend((c, depth + 1) for c in children if type(c) in (dict, list))
    return False


_TOO_DEEP = "<too deep>"


def _pruned(value: Any, limit: int) -> Any:
    """``value`` with what lies deeper than ``limit`` levels replaced by ``"<too deep>"``."""
    if type(value) not in (dict, list):
        return value
    if limit <= 0:
        return _TOO_DEEP
    if type(value) is dict:
        return {k: _pruned(v, limit - 1) for k, v in value.items()}
    return [_pruned(v, limit - 1) for v in value]


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
