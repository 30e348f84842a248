"""From the raw calls of one request to Kafka records: enrich, validate, route.

Every event ends in exactly one place: an accepted record for the events
topic, or a dead letter (original payload + reason) for the dead-letter
topic. Nothing else is dropped than the events of suppressed (forgotten)
users, counted and written nowhere (:mod:`core.suppressions`).

A batch that is no batch of events (more calls than the limit, or mostly
values that are not objects) is refused whole and becomes *one* dead letter
holding the request body (:meth:`Intake.batch_refusal`,
:meth:`Intake.batch_letter`), so one request can never flood the log.

An event nested deeper than ``max_depth`` levels is dead-lettered as
``invalid:too_deep`` before anything walks it recursively; its letter keeps
the payload down to that depth (deeper values become ``"<too deep>"``).

A dead letter of one event is ``{"payload", "reason", "detail", "contract",
"received_at", "source_id", "request"}``: ``detail`` says in words what
``reason`` names, and ``request`` holds the rest of what the collector knew
of the request (``call_type``, the batch's ``sent_at``, ``historical`` for
``/v1/import``, the client ``ip``, the event's ``index`` in it), so that
``python -m ingest replay-dead-letters`` (:mod:`ingest.replay`) can route the
event again exactly as the collector would now. A letter whose payload is not
the event as sent carries ``payload_truncated: true``.

Personal data is anonymised first (:mod:`ingest.anonymise`, as the contract
and the collector's settings say): each call before it is enriched, so its
derived id, its record and its dead letter all hold the anonymised values
only, and the request's address before enrichment fills it into
``context.ip``. A refused batch's letter holds the body with the same fields
rewritten.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from core.collector_settings import CollectorSettings
from data_contracts import Contract, load_contract
from data_contracts.derive import ValidationFailure, compile_fast_validator
from ingest.anonymise import Anonymiser
from ingest.enrich import EnrichError, RequestFacts, enrich_with_adjustment, format_ts

if TYPE_CHECKING:
    from pipelines import PipelineSpec

__all__ = ["MAX_LETTER_BYTES", "BatchRefusal", "Intake", "Record", "Rejection", "Routed"]

MAX_LETTER_BYTES = 900_000
"""Largest dead letter written for a refused batch, under Kafka's default 1 MB per record."""

_MAX_SENT_AT_CHARS = 64
"""A batch-level ``sentAt`` longer than this is no date; its letter keeps its beginning."""


_JSON_CONTENT = ("content-type", b"application/json")


class Record(NamedTuple):
    """One Kafka record, ready to produce (a named tuple: one is made per event, and a frozen
    dataclass costs 2.5x as much to build)."""

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


@dataclass(frozen=True, slots=True)
class BatchRefusal:
    """Why a batch is refused whole: ``code`` is the answer's error, ``reason`` the letter's."""

    code: str
    reason: str
    detail: str


@dataclass
class Routed:
    """The outcome of one request's events."""

    accepted: list[Record] = field(default_factory=list)
    dead_letters: list[Record] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    clamped: int = 0
    """Accepted events whose time lay in the future and was clamped to ``receivedAt``."""
    suppressed: int = 0
    """Events of suppressed users: dropped, neither accepted nor dead-lettered."""


class Intake:
    """Anonymise, enrich, validate and encode events against one contract version.

    ``anonymiser`` defaults to the contract's rewrites with the default
    settings (IP addresses truncated).
    """

    def __init__(
        self,
        contract: Contract,
        validate: Callable[[dict[str, Any]], None],
        max_event_bytes: int,
        max_depth: int = 64,
        anonymiser: Anonymiser | None = None,
    ) -> None:
        self.contract = contract
        self._validate = validate
        self._anonymiser = anonymiser or Anonymiser.for_contract(contract, CollectorSettings())
        self._max_event_bytes = max_event_bytes
        self._max_depth = max_depth
        self._contract_header = contract.ref.encode()
        self._contract_pair = ("contract", self._contract_header)

    @classmethod
    def of_pipeline(cls, spec: PipelineSpec, limits: CollectorSettings) -> Intake:
        """The intake of a collector pipeline: its contract, that contract's fast validator
        and the personal data handling the contract and the collector's settings say."""
        contract = load_contract(spec.contract, spec.contract_major)
        return cls(
            contract,
            compile_fast_validator(contract),
            limits.max_event_bytes,
            limits.max_event_depth,
            Anonymiser.for_contract(contract, limits),
        )

    @classmethod
    def of_collector(cls, limits: CollectorSettings) -> Intake:
        """The intake of the collector's default pipeline (:func:`pipelines.collector_pipeline`)."""
        from pipelines import collector_pipeline

        return cls.of_pipeline(collector_pipeline(), limits)

    @staticmethod
    def batch_refusal(events: list[Any], max_events: int) -> BatchRefusal | None:
        """Why ``events`` is refused whole, or None: the events are routed one by one.

        More than ``max_events`` calls, or more than half of them not JSON objects
        (no SDK sends those: a batch of ``[1, 1, ...]`` is garbage, not 250,000 events).
        """
        if len(events) > max_events:
            return BatchRefusal(
                "too_many_events",
                "batch:too_many_events",
                f"the batch holds {len(events)} calls; the limit is {max_events} per request. "
                "Send smaller batches.",
            )
        not_objects = sum(1 for e in events if type(e) is not dict)
        if not_objects * 2 > len(events):
            return BatchRefusal(
                "invalid_batch",
                "batch:not_objects",
                f"{not_objects} of the batch's {len(events)} calls are not JSON objects; "
                'each call is an object such as {"type": "track", ...}.',
            )
        return None

    def batch_letter(
        self,
        body: bytes,
        events: int,
        refusal: BatchRefusal,
        facts: RequestFacts,
        value: Any = None,
    ) -> Record:
        """The one dead letter of a refused batch: the request body as received.

        ``payload`` is the body as text (``payload_encoding: text``), or base64 when it
        is not UTF-8 or its text would not fit :data:`MAX_LETTER_BYTES`; a body too
        large even then keeps its beginning (``payload_truncated``) and its SHA-256.
        ``value`` is the body parsed: when anonymisation rewrites it, the letter holds
        it re-encoded (``payload_anonymised``; values nested deeper than the event
        limit read ``"<too deep>"``), with the SHA-256 of that text (one of the body
        as received would confirm a guessed address).
        """
        rewritten = self._anonymiser.body(value)
        anonymised = rewritten is not value
        received = len(body)
        if anonymised:  # the calls lie two levels down: under the body and its batch
            body = _encoded(_pruned(rewritten, self._max_depth + 2))
        letter: dict[str, Any] = {
            "payload": None,
            "payload_encoding": "text",
            "payload_bytes": received,
            "payload_sha256": hashlib.sha256(body).hexdigest(),
            "payload_anonymised": anonymised,
            "payload_truncated": False,
            "events": events,
            "reason": refusal.reason,
            "detail": refusal.detail,
            "contract": self.contract.ref,
            "received_at": format_ts(facts.received_at),
            "source_id": facts.source_id,
        }
        try:
            letter["payload"] = body.decode("utf-8")
            value = orjson.dumps(letter)
        except (UnicodeDecodeError, TypeError):
            value = b""
        if not value or len(value) > MAX_LETTER_BYTES:
            room = (MAX_LETTER_BYTES - 2048) * 3 // 4
            letter["payload"] = base64.b64encode(body[:room]).decode()
            letter["payload_encoding"] = "base64"
            letter["payload_truncated"] = len(body) > room
            value = orjson.dumps(letter)
        return Record(
            key=None,
            value=value,
            headers=[
                ("content-type", b"application/json"),
                ("contract", self._contract_header),
                ("reason", refusal.reason.encode()),
            ],
        )

    def route(
        self,
        events: list[Any],
        facts: RequestFacts,
        first_index: int = 0,
        suppressed: Callable[[Any], bool] | None = None,
    ) -> Routed:
        """Each event accepted, dead-lettered, or dropped when ``suppressed(event)``.

        ``first_index``: the first event's index in its request (a replayed dead
        letter's, so an event without ids gets its id again). A suppressed user's
        event is dropped before anything else looks at it, valid or not: a dead
        letter would keep the personal data it carries.
        """
        routed = Routed()
        if facts.ip is not None:
            facts = replace(facts, ip=self._anonymiser.request_ip(facts.ip))
        anonymise = self._anonymiser.event
        for index, sent in enumerate(events, first_index):
            if suppressed is not None and suppressed(sent):
                routed.suppressed += 1
                continue
            event = anonymise(sent)
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
        shape = _shape(event, self._max_depth)
        if shape == _TOO_DEEP:
            raise EnrichError(
                "invalid:too_deep",
                f"the event nests objects or arrays more than {self._max_depth} levels deep",
            )
        enriched, adjustment = enrich_with_adjustment(event, facts, position, null_free=shape == 0)
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
            _JSON_CONTENT,
            self._contract_pair,
            facts.source_header,
            ("event_id", str(enriched["event_id"]).encode()),
        ]
        if adjustment is not None:
            headers.append(("timestamp_adjusted", adjustment.encode()))
        key = str(user).encode() if user is not None else None
        return Record(key, value, headers), adjustment

    def _dead_letter(self, event: Any, rejection: Rejection, facts: RequestFacts) -> Record:
        sent_at = facts.sent_at
        if not (sent_at is None or (type(sent_at) is str and len(sent_at) <= _MAX_SENT_AT_CHARS)):
            sent_at = repr(sent_at)[:_MAX_SENT_AT_CHARS]  # invalid either way: keep it short
        letter = {
            "payload": event,
            "reason": rejection.reason,
            "detail": rejection.detail,
            "contract": self.contract.ref,
            "received_at": format_ts(facts.received_at),
            "source_id": facts.source_id,
            "request": {
                "call_type": facts.call_type,
                "sent_at": sent_at,
                "historical": facts.historical,
                "ip": facts.ip,
                "index": rejection.index,
            },
        }
        try:
            value = orjson.dumps(letter, default=repr)
        except TypeError:  # not valid UTF-8, too deep for orjson, or an int beyond 64 bits
            letter["payload"] = _pruned(event, self._max_depth)
            if type(event) in (dict, list) and _shape(event, self._max_depth) == _TOO_DEEP:
                letter["payload_truncated"] = True
            value = json.dumps(letter, default=repr, ensure_ascii=True).encode()
        if len(value) > MAX_LETTER_BYTES:  # e.g. a 500 KB event of 1e9s, each 1000000000.0
            text = json.dumps(letter["payload"], default=repr, ensure_ascii=True)
            letter["payload"] = text[: MAX_LETTER_BYTES // 2]
            letter["payload_encoding"] = "json_text"
            letter["payload_truncated"] = True
            value = orjson.dumps(letter)
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


_HOLDS_NULL, _TOO_DEEP = 1, 2


def _shape(value: Any, limit: int) -> int:
    """What one walk over ``value`` (a dict or a list, level 1) finds: ``_TOO_DEEP`` when it
    nests dicts and lists more than ``limit`` levels, else ``_HOLDS_NULL`` when a null lies
    anywhere in it, else 0. It recurses at most ``limit`` calls deep (the setting allows
    200) and only into containers: most values of an event are leaves, looked at once."""
    if limit < 1:
        return _TOO_DEEP
    found = 0
    for child in value.values() if type(value) is dict else value:
        if child is None:
            found = _HOLDS_NULL
            continue
        kind = type(child)
        if kind is dict or kind is list:
            inner = _shape(child, limit - 1)
            if inner == _TOO_DEEP:
                return inner
            found |= inner
    return found


def _encoded(value: Any) -> bytes:
    """``value`` as JSON; lone surrogates and integers beyond 64 bits escaped or as text."""
    try:
        return orjson.dumps(value)
    except TypeError:
        return json.dumps(value, default=repr, ensure_ascii=True).encode()


_TOO_DEEP_TEXT = "<too deep>"


def _pruned(value: Any, limit: int) -> Any:
    """``value`` with what lies deeper than ``limit`` levels replaced by ``"<too deep>"``."""
    if type(value) not in (dict, list):
        return value
    if limit <= 0:
        return _TOO_DEEP_TEXT
    if type(value) is dict:
        return {k: _pruned(v, limit - 1) for k, v in value.items()}
    return [_pruned(v, limit - 1) for v in value]


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
