"""Replaying dead letters, the pure part: which letters, back into requests, the report.

After a fix (a contract that accepts more, a larger ``max_age_s``, a larger
event limit) the events the collector dead-lettered can be routed again::

    python -m ingest replay-dead-letters --reason invalid:timestamp_too_old \\
        --since 2026-11-23T08:00:00Z [--until ...] [--dry-run]

Each letter whose reason matches (:class:`ReasonFilter`) is turned back into
the request it came in (:meth:`DeadLetter.facts`: its ``received_at``,
``source_id`` and ``request``) and routed through the collector's own
:class:`~ingest.intake.Intake` with the *current* contract and settings. An
event now valid becomes the record the collector would now write (same key,
same headers, plus ``replayed_from``); one still invalid stays where it is,
counted by its new reason. A letter of a user forgotten since it was
written (one of ``suppressed``, the ids of :mod:`core.suppressions`, matched
on ``userId`` and ``anonymousId`` as the collector matches them) is never
routed again: it is counted in ``suppressed``, and the report and the logs
name no id. The Kafka side (reading the range and the suppression list,
remembering what was replayed, producing exactly once) is
:mod:`ingest.replay_kafka`.

>>> reasons = ReasonFilter.parse(["invalid:timestamp*", "rule:"])
>>> [reasons.matches(r) for r in ("invalid:timestamp_too_old", "rule:identity", "too_large")]
[True, True, False]
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import orjson

from core.event_time import EventTimeBounds
from core.suppressions import IDENTITY_FIELDS, Suppressions, is_suppressed
from ingest.enrich import EnrichError, RequestFacts, format_ts, parse_ts
from ingest.intake import Intake, Record

if TYPE_CHECKING:
    from ingest.routes import Route

__all__ = [
    "REASON_FAMILIES",
    "REPLAYED_FROM",
    "Coordinates",
    "DeadLetter",
    "ReasonFilter",
    "ReplayReport",
    "ReplayRequest",
    "Replayer",
]

REASON_FAMILIES = ("invalid", "missing", "rule", "batch", "too_large")
"""The families of the collector's reasons: ``family:detail``, ``too_large`` alone."""

REPLAYED_FROM = "replayed_from"
"""Header of a replayed record: ``<dead-letter topic>/<partition>/<offset>`` of its letter."""

_PATTERN = re.compile(r"(?P<family>[a-z_]+)(?P<colon>:(?P<detail>[^\s*]+)?)?(?P<star>\*)?")
_TOO_DEEP_MARK = b'"<too deep>"'


@dataclass(frozen=True)
class ReasonFilter:
    """Which reasons to replay: exact reasons, and prefixes (``invalid:``, ``invalid:time*``)."""

    patterns: tuple[str, ...]
    """The reasons as given."""
    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @classmethod
    def parse(cls, patterns: Sequence[str]) -> ReasonFilter:
        """Read ``--reason`` values; raise :class:`ValueError` saying what a reason looks like."""
        if not patterns:
            raise ValueError("give at least one --reason, e.g. --reason invalid:timestamp_too_old")
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in patterns:
            match = _PATTERN.fullmatch(pattern)
            family = match["family"] if match else None
            if match is None or family not in REASON_FAMILIES:
                raise ValueError(
                    f"unknown reason format {pattern!r}: write an exact reason "
                    "(invalid:timestamp_too_old, rule:identity, too_large), a family "
                    "(invalid:, missing:, rule:, batch:) or a prefix (invalid:timestamp*)"
                )
            alone = family == "too_large"
            if alone and (match["colon"] or match["detail"]):
                raise ValueError(f"reason {pattern!r}: too_large has no detail; write too_large")
            if not alone and not match["colon"]:
                raise ValueError(
                    f"reason {pattern!r} names a family only; write {family}: for every "
                    f"{family}:... reason, or an exact one such as {family}:<detail>"
                )
            if match["star"] or (match["colon"] and not match["detail"]):
                prefixes.append(pattern.removesuffix("*"))
            else:
                exact.add(pattern)
        return cls(tuple(patterns), frozenset(exact), tuple(prefixes))

    def matches(self, reason: str) -> bool:
        return reason in self.exact or reason.startswith(self.prefixes)


@dataclass(frozen=True)
class ReplayRequest:
    """One replay: the reasons, the letters' time range ``[since, until)``, dry or not."""

    reasons: ReasonFilter
    since: datetime
    until: datetime | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        for name in ("since", "until"):
            moment = getattr(self, name)
            if moment is not None and moment.tzinfo is None:
                raise ValueError(f"--{name} {moment.isoformat()} has no time zone; add Z or +00:00")
        if self.until is not None and self.since >= self.until:
            raise ValueError(
                f"--since {format_ts(self.since)} is not before --until {format_ts(self.until)}: "
                "the range of letters to read is empty"
            )


@dataclass(frozen=True, slots=True)
class Coordinates:
    """Where a dead letter lies in the log: its identity for the replay ledger."""

    topic: str
    partition: int
    offset: int

    @property
    def key(self) -> bytes:
        return f"{self.topic}/{self.partition}/{self.offset}".encode()


@dataclass(frozen=True)
class DeadLetter:
    """One dead letter as read back; ``unreplayable`` says why it cannot be routed again."""

    at: Coordinates
    reason: str
    detail: str
    payload: Any = None
    received_at: datetime | None = None
    source_id: str | None = None
    request: dict[str, Any] = field(default_factory=dict)
    unreplayable: str | None = None

    @classmethod
    def parse(
        cls, value: bytes | None, at: Coordinates, headers: Sequence[tuple[str, bytes]] = ()
    ) -> DeadLetter:
        """Read a letter's value (``detail``; letters that say ``errors`` read the same)."""
        header_reason = next(
            ((v or b"").decode(errors="replace") for k, v in headers if k == "reason"), ""
        )
        try:
            letter = orjson.loads(value or b"")
        except orjson.JSONDecodeError:
            letter = None
        if type(letter) is not dict:
            return cls(at, header_reason or "unknown", "", unreplayable="unreadable")
        reason = letter.get("reason")
        reason = reason if type(reason) is str else header_reason or "unknown"
        detail = letter.get("detail", letter.get("errors", ""))
        if type(detail) is list:
            detail = "; ".join(map(str, detail))
        request = letter.get("request")
        source_id = letter.get("source_id")
        try:
            received_at = parse_ts(letter.get("received_at"), "received_at")
        except EnrichError:
            received_at = None
        parsed = cls(
            at,
            reason,
            str(detail),
            letter.get("payload"),
            received_at,
            source_id if type(source_id) is str else None,
            request if type(request) is dict else {},
        )
        return replace(parsed, unreplayable=_unreplayable(parsed, letter, value or b""))

    def facts(self, bounds: EventTimeBounds, contract_version: str) -> RequestFacts:
        """The request this letter's event came in, with today's event-time ``bounds``.

        Letters written before they carried ``request`` replay as one call of a
        batch without a batch-level ``sentAt`` (the event's own ``sentAt`` still counts).
        """
        if self.received_at is None or self.source_id is None:
            raise ValueError(f"dead letter {self.at.key.decode()} has no received_at/source_id")
        request = self.request
        call_type, sent_at, ip = (request.get(k) for k in ("call_type", "sent_at", "ip"))
        return RequestFacts(
            received_at=self.received_at,
            source_id=self.source_id,
            contract_version=contract_version,
            call_type=call_type if type(call_type) is str else None,
            sent_at=sent_at,
            ip=ip if type(ip) is str else None,
            historical=request.get("historical") is True,
            bounds=bounds,
        )

    @property
    def index(self) -> int:
        """The event's index in its request (0 when the letter does not say)."""
        index = self.request.get("index")
        return index if type(index) is int and index >= 0 else 0


def _unreplayable(letter: DeadLetter, raw: dict[str, Any], value: bytes) -> str | None:
    if "events" in raw or letter.reason.startswith("batch:"):
        return "batch_refused_whole"
    if raw.get("payload_truncated") or "payload_encoding" in raw:
        return "payload_truncated"
    if letter.reason == "invalid:too_deep" and _TOO_DEEP_MARK in value:
        return "payload_truncated"  # written before letters said so
    if letter.received_at is None or letter.source_id is None:
        return "no_request_facts"
    return None


@dataclass
class ReplayReport:
    """What a replay did, counted in dead letters (one letter holds one event)."""

    dead_letter_topic: str
    events_topic: str
    request: ReplayRequest
    read: int = 0
    """Letters read in the time range."""
    matched: int = 0
    """Of those, letters whose reason matched."""
    already_replayed: int = 0
    """Matched letters an earlier replay produced (in the ledger): not produced again."""
    suppressed: int = 0
    """Matched letters of users forgotten since (the suppression list): never produced."""
    now_valid: int = 0
    """Matched letters whose event the current contract and settings accept."""
    produced: int = 0
    """Of those, events written to the events topic (0 in a dry run)."""
    still_invalid: Counter[str] = field(default_factory=Counter)
    """Matched letters still refused, by their new reason; they stay where they are."""
    not_replayable: Counter[str] = field(default_factory=Counter)
    """Matched letters that hold no replayable event, by why (truncated payload, ...)."""

    def as_dict(self) -> dict[str, Any]:
        until = self.request.until
        return {
            "dead_letter_topic": self.dead_letter_topic,
            "events_topic": self.events_topic,
            "reasons": list(self.request.reasons.patterns),
            "since": format_ts(self.request.since),
            "until": format_ts(until) if until is not None else None,
            "dry_run": self.request.dry_run,
            "read": self.read,
            "matched": self.matched,
            "already_replayed": self.already_replayed,
            "suppressed": self.suppressed,
            "now_valid": self.now_valid,
            "produced": self.produced,
            "still_invalid": dict(sorted(self.still_invalid.items())),
            "not_replayable": dict(sorted(self.not_replayable.items())),
        }


class Replayer:
    """Decide letter by letter; the records to produce come back, the counts go to ``report``.

    ``routes`` (source id -> :class:`~ingest.routes.Route`) sends each letter through its
    source's pipeline, as the collector does; without them every letter goes through
    ``intake``. :attr:`topic` is where the last record returned belongs (None: the
    collector's default topic). ``suppressed`` holds the ids of the forgotten users: their
    letters are counted, never returned."""

    def __init__(
        self,
        intake: Intake,
        bounds: EventTimeBounds,
        report: ReplayReport,
        replayed: Container[bytes] = frozenset(),
        routes: Mapping[str, Route] | None = None,
        suppressed: Suppressions | None = None,
    ) -> None:
        self._intake = intake
        self._bounds = bounds
        self._report = report
        self._replayed = replayed
        self._routes = routes
        self._suppressed = suppressed or Suppressions()
        self.topic: str | None = None

    def consider(self, letter: DeadLetter) -> Record | None:
        """The record to write for ``letter`` now, or None (not matched, done, still invalid)."""
        report = self._report
        report.read += 1
        if not report.request.reasons.matches(letter.reason):
            return None
        report.matched += 1
        if letter.at.key in self._replayed:
            report.already_replayed += 1
            return None
        route = None if self._routes is None else self._routes.get(letter.source_id or "")
        pipeline, fields = (route.pipeline, route.identity) if route else ("", IDENTITY_FIELDS)
        forgotten = self._suppressed.of(pipeline)
        if is_suppressed(letter.payload, forgotten, fields or IDENTITY_FIELDS):
            report.suppressed += 1  # the id goes nowhere: not into the report, not into a log
            return None
        if letter.unreplayable is not None:
            report.not_replayable[letter.unreplayable] += 1
            return None
        intake, self.topic = self._intake, None
        if self._routes is not None:
            if route is None:  # its write key was removed since: no pipeline takes it now
                report.not_replayable["source_without_pipeline"] += 1
                return None
            intake, self.topic = route.intake, route.topic
        facts = letter.facts(self._bounds, intake.contract.version)
        routed = intake.route([letter.payload], facts, first_index=letter.index)
        if routed.rejections:
            report.still_invalid[routed.rejections[0].reason] += 1
            return None
        report.now_valid += 1
        (record,) = routed.accepted
        return Record(record.key, record.value, [*record.headers, (REPLAYED_FROM, letter.at.key)])
