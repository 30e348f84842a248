"""The suppression list: the users the platform has forgotten, as a compacted Kafka topic.

One record per forgotten user and scope (``settings.kafka.suppressions_topic``):
the key is the id (a ``userId``, an ``anonymousId``, a buyer: whatever the
pipeline's identity fields hold) for a person forgotten everywhere, or
``<pipeline>`` + ``\\x1f`` + the id for one forgotten in that pipeline only; the
value is the request as JSON ``{"id", "requested_at", "request_id", "pipeline"}``.
Compaction keeps the latest record of each key, so the topic *is* the list, for
as long as the platform runs; a record with a null value (a tombstone) lifts a
suppression. :class:`Suppressions` holds it: :meth:`Suppressions.of` the ids a
pipeline drops (those forgotten everywhere and those forgotten in it).

- :func:`record_suppression` appends a request (idempotent producer; the same
  id again only replaces its record);
- :func:`read_suppressions` reads the whole list once (the batch layer, before
  it writes bronze or silver);
- :class:`SuppressionList` keeps the list in memory from a background
  consumer (the collector), with its size and lag;
- :func:`is_suppressed` says whether an event is a suppressed user's, by the
  pipeline's identity fields.

The list holds the ids themselves: it must, to recognise the users' events.
Logs name a request by :func:`subject_of` (a digest), never by the id.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Container, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from core.log import get_logger, log_event
from core.settings import KafkaSettings

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = [
    "IDENTITY_FIELDS",
    "SuppressionList",
    "SuppressionRequest",
    "Suppressions",
    "is_suppressed",
    "read_suppressions",
    "record_suppression",
    "subject_of",
]

IDENTITY_FIELDS = ("userId", "anonymousId")
"""The fields of a Segment-shaped event that name its user (the default of
:func:`is_suppressed`; a pipeline's own are its ``PipelineSpec.identity``)."""

SCOPE_SEPARATOR = "\x1f"
"""Between the pipeline and the id in the key of a suppression of one pipeline."""

_log = get_logger(__name__)


@dataclass(frozen=True)
class SuppressionRequest:
    """One request to forget a user: the id, when it was asked and which run asked it."""

    user_id: str
    requested_at: datetime
    request_id: str
    pipeline: str | None = None
    """The pipeline the person is forgotten in; None: every pipeline, present and future."""

    def __post_init__(self) -> None:
        if not isinstance(self.user_id, str) or not self.user_id.strip():
            raise ValueError(
                f"A user id to forget is a non-empty string (a userId or an anonymousId), "
                f"got {self.user_id!r}."
            )
        if self.requested_at.tzinfo is None:
            raise ValueError("requested_at needs a time zone; pass datetime.now(UTC).")
        if self.pipeline is not None and (not self.pipeline or SCOPE_SEPARATOR in self.pipeline):
            raise ValueError(f"A pipeline's name, or None for every pipeline: {self.pipeline!r}.")

    def record(self) -> tuple[bytes, bytes]:
        """(key, value) of the request's record.

        >>> from datetime import UTC
        >>> key, value = SuppressionRequest("u-1", datetime(2026, 1, 2, tzinfo=UTC), "r").record()
        >>> key, json.loads(value)
        (b'u-1', {'id': 'u-1', 'requested_at': '2026-01-02T00:00:00+00:00', 'request_id': 'r', \
'pipeline': None})
        >>> SuppressionRequest("u-1", datetime(2026, 1, 2, tzinfo=UTC), "r", "shop").record()[0]
        b'shop\\x1fu-1'
        """
        value = {
            "id": self.user_id,
            "requested_at": self.requested_at.isoformat(),
            "request_id": self.request_id,
            "pipeline": self.pipeline,
        }
        scope = "" if self.pipeline is None else self.pipeline + SCOPE_SEPARATOR
        return (scope + self.user_id).encode(), json.dumps(value).encode()


@dataclass
class Suppressions:
    """The suppression list: the ids forgotten everywhere, and per pipeline the ids forgotten
    in it only.

    >>> s = Suppressions()
    >>> s.apply(b"u-1", b"{}"); s.apply(b"shop\\x1fb-7", b"{}")
    >>> sorted(s.of("shop")), sorted(s.of("web")), len(s)
    (['b-7', 'u-1'], ['u-1'], 2)
    >>> s.apply(b"shop\\x1fb-7", None); sorted(s.of("shop"))
    ['u-1']
    >>> s.apply(b"u-2", b'{"requested_at": "2026-01-02T00:00:00+00:00"}')
    >>> s.last_request("web"), s.last_request("shop") == s.last_request("web")
    (datetime.datetime(2026, 1, 2, 0, 0, tzinfo=datetime.timezone.utc), True)
    >>> s.apply(b"shop\\x1fb-9", b'{"requested_at": "2026-01-03T00:00:00+00:00"}')
    >>> s.last_request("shop").day, s.last_request("web").day  # a forget in shop only
    (3, 2)
    """

    everywhere: set[str] = field(default_factory=set)
    scoped: dict[str, set[str]] = field(default_factory=dict)
    requested: dict[str, datetime] = field(default_factory=dict)
    """The latest request's time per scope: ``""`` for every pipeline, else the pipeline."""

    def of(self, pipeline: str) -> frozenset[str]:
        """The ids whose events ``pipeline`` drops."""
        return frozenset(self.everywhere | self.scoped.get(pipeline, set()))

    def last_request(self, pipeline: str) -> datetime | None:
        """When a person was last forgotten in ``pipeline`` (everywhere, or in it)."""
        found = [self.requested[s] for s in ("", pipeline) if s in self.requested]
        return max(found, default=None)

    def __len__(self) -> int:
        return len(self.everywhere) + sum(len(ids) for ids in self.scoped.values())

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One record of the topic: a request adds its id, a tombstone removes it."""
        if not key:
            return
        text = key.decode("utf-8", "replace")
        pipeline, _, user_id = text.rpartition(SCOPE_SEPARATOR)
        ids = self.scoped.setdefault(pipeline, set()) if pipeline else self.everywhere
        if value is None:
            ids.discard(user_id)
            return
        ids.add(user_id)
        at = _requested_at(value)
        if at is not None and (pipeline not in self.requested or at > self.requested[pipeline]):
            self.requested[pipeline] = at


def _requested_at(value: bytes) -> datetime | None:
    """A request record's ``requested_at`` (None when it has none, as older records)."""
    try:
        at = datetime.fromisoformat(json.loads(value)["requested_at"])
    except (ValueError, KeyError, TypeError):
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def subject_of(user_id: str, key: SecretStr) -> str:
    """A stable keyed digest of ``user_id`` that logs, reports, the ledger and Delta's table
    history carry instead of the id (HMAC-SHA256 under ``batch.subject_key``): without the
    key, nobody holding candidate ids can tell which of them was forgotten.

    >>> subject_of("u-1", SecretStr("k" * 32))
    'hmac:79c14fe793b14633'
    >>> subject_of("u-1", SecretStr("k" * 32)) != subject_of("u-1", SecretStr("j" * 32))
    True
    """
    digest = hmac.new(key.get_secret_value().encode(), user_id.encode(), hashlib.sha256)
    return "hmac:" + digest.hexdigest()[:16]


def _as_id(value: Any) -> str | None:
    if type(value) is str:
        return value or None  # an empty id names nobody
    if type(value) is int:  # a numeric userId, as some SDKs send it
        return str(value)
    return None


def is_suppressed(event: Any, ids: Container[str], fields: Sequence[str] = IDENTITY_FIELDS) -> bool:
    """Whether one of ``event``'s identity ``fields`` (dotted paths) holds one of ``ids``.

    >>> is_suppressed({"userId": "u-1", "anonymousId": "a-9"}, {"a-9"})
    True
    >>> is_suppressed({"userId": 42}, {"42"}), is_suppressed({"anonymousId": "a-1"}, {"a-9"})
    (True, False)
    >>> is_suppressed({"order": {"buyer": "b-7"}}, {"b-7"}, ("order.buyer",))
    True
    >>> is_suppressed("not an object", {"a-9"})
    False
    """
    if type(event) is not dict or not ids:
        return False
    for path in fields:  # a loop, not any(): this runs for every event collected
        value: Any = event.get(path)  # a top-level field, as Segment's ids are
        if value is None and "." in path:
            value = event
            for part in path.split("."):
                value = value.get(part) if type(value) is dict else None
        if value is not None and _as_id(value) in ids:
            return True
    return False


def record_suppression(kafka: KafkaSettings, request: SuppressionRequest, timeout_s=30.0) -> None:
    """Append ``request`` to the suppressions topic and wait for Kafka's acknowledgement."""
    from confluent_kafka import Producer

    producer = Producer(
        kafka.client_config()
        | {"enable.idempotence": True, "acks": "all", "message.timeout.ms": int(timeout_s * 1000)}
    )
    failures: list[str] = []
    key, value = request.record()
    producer.produce(
        kafka.suppressions_topic,
        key=key,
        value=value,
        on_delivery=lambda error, _: failures.append(str(error)) if error else None,
    )
    left = producer.flush(timeout_s + 5)
    if left or failures:
        raise RuntimeError(
            f"Suppression request {request.request_id} was not acknowledged by Kafka "
            f"({failures or f'{left} record(s) undelivered'}); nothing was deleted. Check that "
            f"topic {kafka.suppressions_topic!r} exists (`python -m platformctl up kafka`)."
        )


class _Tail:
    """A consumer of the whole topic from its beginning, without a committed group."""

    def __init__(self, kafka: KafkaSettings) -> None:
        from confluent_kafka import Consumer

        self.topic = kafka.suppressions_topic
        self.consumer: Consumer = Consumer(
            kafka.client_config()
            | {
                "group.id": f"suppressions-reader-{time.monotonic_ns()}",  # never committed
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "log_level": 3,
            }
        )
        self.partitions: list[int] = []
        self.next: dict[int, int] = {}
        self.at_end: set[int] = set()
        self.error: str | None = None
        """The last error a read reported (a broker down, the topic deleted ...)."""
        self.start_ends: dict[int, tuple[int, int]] = {}
        """Each partition's (low, high) watermark when :meth:`assign` started the read."""

    def assign(self, timeout_s: float) -> str | None:
        """Start reading every partition from the beginning; why not, when it cannot.

        Each partition's end is asked first (:attr:`start_ends`): a consumer that fetches
        already answers a watermark query only after its next fetch round (~0.5 s a
        partition), one that does not yet answers at once.
        """
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        metadata = self.consumer.list_topics(self.topic, timeout=timeout_s).topics.get(self.topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            error = metadata.error if metadata is not None else "no metadata"
            return f"topic {self.topic!r} is not readable ({error})"
        self.partitions = sorted(metadata.partitions)
        self.start_ends = self.ends(timeout_s)
        self.consumer.assign(
            [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self.partitions]
        )
        return None

    def read(self, ids: Suppressions, timeout_s: float, at_most: int = 1000) -> None:
        """Apply the records available within ``timeout_s`` (``at_most`` of them) to ``ids``."""
        from confluent_kafka import KafkaError

        for message in self.consumer.consume(min(at_most, 1000), timeout_s):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                self.at_end.add(message.partition())
                self.next[message.partition()] = message.offset()
            elif error is None:
                ids.apply(message.key(), message.value())
                self.next[message.partition()] = message.offset() + 1
                self.at_end.discard(message.partition())
            else:
                self.error = str(error)

    @property
    def caught_up(self) -> bool:
        return bool(self.partitions) and self.at_end >= set(self.partitions)

    def ends(self, timeout_s: float) -> dict[int, tuple[int, int]]:
        """Each partition's (low, high) watermark now: where a read from the start ends."""
        from confluent_kafka import TopicPartition

        return {
            p: self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout_s)
            for p in self.partitions
        }

    def left(self, ends: dict[int, tuple[int, int]]) -> int:
        """Records (and transaction markers) between this reader and ``ends``."""
        return sum(max(high - self.next.get(p, low), 0) for p, (low, high) in ends.items())

    def reached(self, ends: dict[int, tuple[int, int]]) -> bool:
        """Every partition read up to ``ends``, or at its end (a marker may end it)."""
        return all(
            p in self.at_end or self.next.get(p, low) >= high for p, (low, high) in ends.items()
        )

    def lag(self, timeout_s: float = 2.0) -> int:
        """Records between where this reader is and the end of the topic."""
        return self.left(self.ends(timeout_s))

    def close(self) -> None:
        self.consumer.close()


def read_suppressions(kafka: KafkaSettings, timeout_s: float = 60.0) -> Suppressions:
    """Every suppression now: the topic read from its beginning to its end."""
    tail = _Tail(kafka)
    ids = Suppressions()
    deadline = time.monotonic() + timeout_s
    try:
        why = tail.assign(timeout_s)
        if why is not None:
            raise RuntimeError(
                f"The suppression list cannot be read: {why}. Create the platform's topics "
                "(`python -m platformctl up kafka`) before running the batch layer."
            )
        # The end is fixed when the read starts (each partition's high watermark): a topic
        # with nothing new is read in one round trip per partition, not a consume timeout.
        ends = tail.start_ends
        while not (tail.caught_up or tail.reached(ends)):
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Read {len(ids)} suppressions from {tail.topic!r} but not its end after "
                    f"{timeout_s:.0f}s (last error: {tail.error or 'none'}); is Kafka reachable?"
                )
            tail.read(ids, 0.5, at_most=max(tail.left(ends), 1))
    finally:
        tail.close()
    return ids


class SuppressionList:
    """The suppression list in memory, kept current by a background consumer thread.

    ``suppresses(event)`` is a set lookup, cheap on the request path; the
    thread applies new records as they arrive, retries while the topic cannot
    be read and measures its lag every ``lag_every_s`` seconds.
    """

    def __init__(self, kafka: KafkaSettings, *, lag_every_s: float = 5.0) -> None:
        self._kafka = kafka
        self._ids = Suppressions()
        self._lag_every_s = lag_every_s
        self.loaded = threading.Event()
        """Set once the list was read to the end of the topic."""
        self.lag: int | None = None
        """Records not applied yet, as last measured (None before the first measure)."""
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="suppressions", daemon=True)
        self._thread.start()

    @property
    def size(self) -> int:
        return len(self._ids)

    def suppresses(
        self, event: Any, pipeline: str | None = None, fields: Sequence[str] = IDENTITY_FIELDS
    ) -> bool:
        """Whether ``event`` is of a person forgotten in ``pipeline`` (everywhere, or in it),
        by its identity ``fields``."""
        ids = self._ids
        if is_suppressed(event, ids.everywhere, fields):
            return True
        scoped = ids.scoped.get(pipeline or "")
        return bool(scoped) and is_suppressed(event, scoped, fields)  # type: ignore[arg-type]

    def of(self, pipeline: str) -> frozenset[str]:
        """The ids whose events ``pipeline`` drops now (forgotten everywhere, or in it)."""
        return self._ids.of(pipeline)

    def last_request(self, pipeline: str) -> datetime | None:
        """When a person was last forgotten in ``pipeline``, as far as the list has read."""
        return self._ids.last_request(pipeline)

    def status(self) -> dict[str, Any]:
        """Size, lag, whether the list is loaded, and the last error (for ``/health``)."""
        return {"size": self.size, "lag": self.lag, "loaded": self.loaded.is_set()} | (
            {"error": self.error} if self.error else {}
        )

    def _run(self) -> None:
        from confluent_kafka import KafkaException

        tail = _Tail(self._kafka)
        measured = 0.0
        try:
            while not self._stop.is_set():
                try:
                    if not tail.partitions:
                        self.error = tail.assign(5.0)
                        if self.error is not None:
                            self._stop.wait(2.0)
                            continue
                    tail.read(self._ids, 0.5)
                    self.error = tail.error
                    if tail.caught_up and not self.loaded.is_set():
                        self.loaded.set()
                        log_event(_log, "suppressions.loaded", size=self.size)
                    if time.monotonic() - measured > self._lag_every_s:
                        self.lag, measured = tail.lag(), time.monotonic()
                        tail.error = None  # the cluster answered
                except KafkaException as exc:
                    self.error = str(exc)
                    self._stop.wait(2.0)
        finally:
            tail.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
