"""Replaying dead letters, the Kafka part: the letters of a time range, the ledger, the writes.

**Which letters.** The range starts, in every partition of the dead-letter
topic, at the offset ``offsets_for_times`` gives for ``--since``, and ends at
the one it gives for ``--until`` (or at the end of the partition when the run
starts: letters arriving during a run wait for the next one).

**Not the forgotten.** The suppression list (``kafka.suppressions_topic``,
:func:`~core.suppressions.read_suppressions`) is read whole once the range
is fixed; a letter of a user on it is skipped and counted (``suppressed``).
A forget recorded while a replay runs is applied by the next one and, for
what this one wrote, by the batch layer (bronze drops a suppressed user's
records as it reads the log).

**Exactly once, by a ledger written in the same transaction.** Every
replayed letter gets an entry in ``<dlq_topic>.replayed``
(:func:`~ingest.topics.replay_ledger_topic`), keyed by the letter's position
``<topic>/<partition>/<offset>``. The replayed event and its entry are
written by one transactional producer in one Kafka transaction (a chunk of
letters per transaction): both are committed, or neither. A run first reads
the ledger (``read_committed``) and skips every letter in it, so a second run
over the same letters writes nothing, whatever reasons or range it is given,
and a run that fails half-way leaves no event without its entry: running it
again finishes the work. The producer's ``transactional.id`` is one per
dead-letter topic and is registered (``init_transactions``) *before* the
ledger is read: a replay still running is fenced off then (its open
transaction aborted, its next commit refused), so two replays never both
write a letter.

Why not a consumer group committing its offsets after each flush: a group
remembers *how far* it read, not *what* it wrote. Letters still invalid would
be passed for good (a later fix could not replay them), another ``--reason``
or ``--since`` would need another group and could write a letter twice, and
a crash between the flush and the offset commit writes the chunk again.

Readers of the events topic in ``read_committed`` (librdkafka's default)
never see an aborted chunk; Spark's Kafka source reads ``read_uncommitted``
by default and may, in which case the event is there twice after the rerun
and deduplicated on ``(source_id, event_id)`` like any client retry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import orjson

from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import KafkaSettings, Settings
from core.suppressions import read_suppressions
from ingest.enrich import format_ts
from ingest.intake import Record
from ingest.replay import Coordinates, DeadLetter, Replayer, ReplayReport, ReplayRequest
from ingest.routes import routes_default, routes_of
from ingest.topics import ensure_topics, replay_ledger_topic

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = ["ReplayFailed", "ReplayRefused", "run_replay"]

_log = get_logger(__name__)
_TIMEOUT_S = 30.0
_PROGRESS_EVERY = 10_000
_Range = tuple[int, int, int]
"""(partition, first offset, end offset): the offsets ``first <= offset < end``."""


class ReplayRefused(ValueError):
    """The replay cannot start (a topic is missing); nothing was read or written."""


class ReplayFailed(RuntimeError):
    """Kafka failed during the replay; committed chunks are replayed, the open one is not."""


def run_replay(settings: Settings, request: ReplayRequest, chunk: int = 500) -> ReplayReport:
    """Replay the matching letters of ``request``'s range; ``chunk`` letters per transaction.

    Raises :class:`ReplayRefused` before anything is read when a topic is missing, and
    :class:`ReplayFailed` when Kafka fails on the way.
    """
    from confluent_kafka import KafkaException

    try:
        return _replay(settings, request, chunk)
    except KafkaException as exc:
        raise ReplayFailed(
            f"Kafka failed: {exc}; what was committed is in the ledger, run the same replay again"
        ) from None


def _replay(settings: Settings, request: ReplayRequest, chunk: int) -> ReplayReport:
    from confluent_kafka.admin import AdminClient

    kafka = settings.kafka
    admin = AdminClient(kafka.client_config())
    existing = admin.list_topics(timeout=_TIMEOUT_S).topics
    needed = (kafka.dlq_topic, kafka.events_topic, kafka.suppressions_topic)
    missing = [t for t in needed if t not in existing]
    if missing:
        raise ReplayRefused(
            f"topic {', '.join(missing)} does not exist on {kafka.bootstrap_servers}: check "
            "WAP_KAFKA__DLQ_TOPIC, WAP_KAFKA__EVENTS_TOPIC and WAP_KAFKA__SUPPRESSIONS_TOPIC "
            "(the collector's topics; `python -m platformctl up kafka` creates them)"
        )
    ledger = replay_ledger_topic(kafka)
    report = ReplayReport(kafka.dlq_topic, kafka.events_topic, request)
    writer = None
    if not request.dry_run:
        ensure_topics(admin, [ledger], _TIMEOUT_S)
        writer = _TransactionalWriter(settings, ledger.name)  # fences a replay still running
    reader = _reader(kafka)
    try:
        ranges = _letter_ranges(reader, kafka.dlq_topic, request)
        log_event(
            _log,
            "replay.started",
            topic=kafka.dlq_topic,
            ranges=[{"partition": p, "from": a, "to": b} for p, a, b in ranges],
            reasons=list(request.reasons.patterns),
            dry_run=request.dry_run,
        )
        replayed = _replayed(reader, ledger.name) if writer or ledger.name in existing else set()
        routes = routes_of(settings)
        bounds = EventTimeBounds.from_settings(settings)
        forgotten = read_suppressions(kafka, _TIMEOUT_S)  # read after the range is fixed
        default = routes_default(routes).intake
        replayer = Replayer(default, bounds, report, replayed, routes, forgotten)
        for letter in _letters(reader, kafka.dlq_topic, ranges):
            record = replayer.consider(letter)
            if record is not None and writer is not None:
                topic = replayer.topic or kafka.events_topic
                writer.add(topic, record, _ledger_entry(letter, record))
                if writer.pending >= chunk:
                    report.produced += writer.commit()
                    _progress(report)
            elif report.read % _PROGRESS_EVERY == 0:
                _progress(report)
        if writer is not None:
            report.produced += writer.commit()
    finally:
        reader.close()
        if writer is not None:
            writer.close()
    log_event(_log, "replay.finished", **report.as_dict())
    return report


def _progress(report: ReplayReport) -> None:
    counts = report.as_dict()
    log_event(
        _log,
        "replay.progress",
        **{
            k: counts[k]
            for k in ("read", "matched", "already_replayed", "suppressed", "now_valid", "produced")
        },
    )


def _ledger_entry(letter: DeadLetter, record: Record) -> Record:
    """The ledger's record of a replayed letter: keyed by its position, saying what it became."""
    headers = dict(record.headers)
    entry = {
        "reason": letter.reason,
        "source_id": headers["source_id"].decode(),
        "event_id": headers["event_id"].decode(),
        "replayed_at": format_ts(datetime.now(UTC)),
    }
    return Record(letter.at.key, orjson.dumps(entry), [("content-type", b"application/json")])


def _reader(kafka: KafkaSettings) -> Consumer:
    from confluent_kafka import Consumer

    return Consumer(
        kafka.client_config()
        | {
            "group.id": "ingest-replay-dead-letters",  # required by the client; never committed
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # a start deleted by retention: its first letter
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )


def _letter_ranges(reader: Consumer, topic: str, request: ReplayRequest) -> list[_Range]:
    """The offsets of ``[since, until)`` in each partition of ``topic`` that has any."""
    from confluent_kafka import TopicPartition

    partitions = sorted(reader.list_topics(topic, timeout=_TIMEOUT_S).topics[topic].partitions)

    def offsets_at(moment: datetime) -> list[int]:
        ms = int(moment.timestamp() * 1000)
        found = reader.offsets_for_times(
            [TopicPartition(topic, p, ms) for p in partitions], timeout=_TIMEOUT_S
        )
        return [tp.offset for tp in found]

    ends = [
        reader.get_watermark_offsets(TopicPartition(topic, p), _TIMEOUT_S)[1] for p in partitions
    ]
    starts = offsets_at(request.since)
    untils = offsets_at(request.until) if request.until is not None else ends
    ranges = []
    for partition, start, until, end in zip(partitions, starts, untils, ends, strict=True):
        stop = min(until, end) if until >= 0 else end  # -1: no letter that late
        first = start if start >= 0 else end
        if first < stop:
            ranges.append((partition, first, stop))
    return ranges


def _replayed(reader: Consumer, ledger: str) -> set[bytes]:
    """The positions of every letter replayed before (the ledger's committed keys)."""
    from confluent_kafka import TopicPartition

    low, high = reader.get_watermark_offsets(TopicPartition(ledger, 0), _TIMEOUT_S)
    ranges = [(0, low, high)] if low < high else []
    return {message.key() for message in _read(reader, ledger, ranges)}


def _letters(reader: Consumer, topic: str, ranges: list[_Range]) -> Iterator[DeadLetter]:
    for message in _read(reader, topic, ranges):
        at = Coordinates(topic, message.partition(), message.offset())
        yield DeadLetter.parse(message.value(), at, message.headers() or ())


def _read(reader: Consumer, topic: str, ranges: list[_Range]) -> Iterator:
    """The messages of ``ranges`` of ``topic``, partition by partition's own order."""
    from confluent_kafka import KafkaError, TopicPartition

    ends = {partition: end for partition, _, end in ranges}
    if not ends:
        return
    reader.assign([TopicPartition(topic, p, first) for p, first, _ in ranges])
    try:
        while ends:
            message = reader.poll(_TIMEOUT_S)
            if message is None:
                raise ReplayFailed(
                    f"no record of {topic} came in {_TIMEOUT_S:.0f} s while reading partitions "
                    f"{sorted(ends)} (is Kafka up?); nothing more was written"
                )
            partition = message.partition()
            error = message.error()
            if error is not None and error.code() != KafkaError._PARTITION_EOF:
                raise ReplayFailed(f"reading {topic}: {error}")
            if partition not in ends:
                continue
            if error is not None or message.offset() >= ends[partition]:
                del ends[partition]  # at the end of the partition, or past the range
                continue
            if message.offset() + 1 >= ends[partition]:
                del ends[partition]
            yield message
    finally:
        reader.unassign()


class _TransactionalWriter:
    """Replayed events and their ledger entries, committed together one chunk at a time."""

    def __init__(self, settings: Settings, ledger: str) -> None:
        from confluent_kafka import Producer

        from ingest.producer import producer_config

        kafka = settings.kafka
        config = producer_config(kafka, settings.collector) | {
            "transactional.id": f"ingest-replay-dead-letters.{kafka.dlq_topic}",
            "client.id": "ingest-replay-dead-letters",
        }
        self._producer = Producer(config)
        self._producer.init_transactions(_TIMEOUT_S)
        self._ledger = ledger
        self._open = False
        self.pending = 0
        """Letters in the open transaction."""

    def add(self, topic: str, record: Record, entry: Record) -> None:
        if not self._open:
            self._producer.begin_transaction()
            self._open = True
        self._producer.produce(topic, value=record.value, key=record.key, headers=record.headers)
        self._producer.produce(
            self._ledger, value=entry.value, key=entry.key, headers=entry.headers
        )
        self._producer.poll(0)
        self.pending += 1

    def commit(self) -> int:
        """Commit the open transaction (waiting for every record); return its letters."""
        from confluent_kafka import KafkaException

        if not self._open:
            return 0
        try:
            self._producer.commit_transaction(_TIMEOUT_S)
        except KafkaException as exc:
            self._abort()
            raise ReplayFailed(
                f"Kafka did not commit the last {self.pending} replayed events ({exc}); they "
                "are not in the log and not in the ledger: run the same replay again"
            ) from None
        done, self.pending, self._open = self.pending, 0, False
        return done

    def _abort(self) -> None:
        from confluent_kafka import KafkaException

        # Fenced or gone: the broker aborts the transaction on its timeout.
        with contextlib.suppress(KafkaException):
            self._producer.abort_transaction(_TIMEOUT_S)
        self._open = False

    def close(self) -> None:
        if self._open:
            self._abort()
        self._producer.flush(_TIMEOUT_S)
