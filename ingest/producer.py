"""An asyncio face on confluent-kafka's producer: await until Kafka acknowledged.

One librdkafka producer per process (idempotent, ``acks=all``, compressed),
a background thread serving its delivery reports, and
:meth:`EventProducer.deliver`, which produces a request's records and returns
only when every one was acknowledged by the in-sync replicas, or raises
:class:`KafkaUnavailable` so the HTTP layer can answer 503.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from core.settings import CollectorSettings, KafkaSettings
from ingest.intake import Record

__all__ = ["EventProducer", "KafkaUnavailable", "producer_config"]


class KafkaUnavailable(RuntimeError):
    """Kafka did not take the records; nothing was acknowledged to the client.

    ``queued``: how many of the request's records entered the producer before the
    failure. Those may still reach the log (a retry is then deduplicated); with
    ``queued == 0`` nothing of the request was kept.
    """

    def __init__(self, message: str, queued: int = 0) -> None:
        super().__init__(message)
        self.queued = queued


def producer_config(kafka: KafkaSettings, collector: CollectorSettings) -> dict[str, Any]:
    return kafka.client_config() | {
        "enable.idempotence": True,
        "acks": "all",
        "compression.type": collector.compression,
        "linger.ms": collector.linger_ms,
        "batch.num.messages": 10_000,
        "queue.buffering.max.messages": collector.queue_max_messages,
        "message.timeout.ms": int(collector.delivery_timeout_s * 1000),
        "socket.keepalive.enable": True,
        "client.id": "web-activity-collector",
    }


class _Pending:
    """Counts down one request's deliveries; resolves a future on the event loop."""

    __slots__ = ("error", "future", "loop", "remaining")

    def __init__(self, loop: asyncio.AbstractEventLoop, count: int) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        # A request that stopped waiting (no answer in time) never reads a late failure:
        # reading it here keeps asyncio from logging it as "never retrieved".
        self.future.add_done_callback(_read_outcome)
        self.remaining = count
        self.error: KafkaError | None = None

    def on_delivery(self, error: KafkaError | None, _message: Any) -> None:
        # Runs on the poll thread.
        if error is not None and self.error is None:
            self.error = error
        self.remaining -= 1
        if self.remaining == 0:
            self.loop.call_soon_threadsafe(self._finish)

    def _finish(self) -> None:
        if self.future.done():
            return
        if self.error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(KafkaUnavailable(f"Kafka rejected a record: {self.error}"))


def _read_outcome(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


class EventProducer:
    """Produce records and await their acknowledgement."""

    def __init__(self, config: dict[str, Any], delivery_timeout_s: float) -> None:
        self._producer = Producer(config | {"error_cb": self._on_error})
        self._capacity = int(config.get("queue.buffering.max.messages", 100_000))
        self._timeout = delivery_timeout_s
        self._stop = threading.Event()
        self._all_brokers_down_since: float | None = None
        self._probe: asyncio.Future[bool] | None = None
        self._poller = threading.Thread(target=self._poll, name="kafka-delivery", daemon=True)
        self._poller.start()

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._all_brokers_down_since = time.monotonic()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._producer.poll(0.05)

    @property
    def queue_depth(self) -> int:
        """Records produced but not yet acknowledged."""
        return len(self._producer)

    @property
    def brokers_down(self) -> bool:
        """librdkafka reported all brokers down, and no delivery or probe succeeded since."""
        return self._all_brokers_down_since is not None

    async def deliver(self, topic_records: Sequence[tuple[str, Record]]) -> None:
        """Produce every (topic, record) and wait until Kafka acknowledged all of them."""
        if not topic_records:
            return
        waiting = len(self._producer)
        if waiting + len(topic_records) > self._capacity:
            # All or nothing: a request never leaves part of itself in the queue.
            raise KafkaUnavailable(
                f"the producer queue is full ({waiting} records wait for Kafka; "
                f"this request has {len(topic_records)})"
            )
        pending = _Pending(asyncio.get_running_loop(), len(topic_records))
        produced = 0
        try:
            for topic, record in topic_records:
                self._producer.produce(
                    topic,
                    value=record.value,
                    key=record.key,
                    headers=record.headers,
                    on_delivery=pending.on_delivery,
                )
                produced += 1
        except BufferError:
            raise KafkaUnavailable("the producer queue is full", queued=produced) from None
        except KafkaException as exc:
            raise KafkaUnavailable(f"produce failed: {exc}", queued=produced) from None
        finally:
            # Records that did not enter the queue will never be reported.
            if produced < len(topic_records):
                for _ in range(len(topic_records) - produced):
                    pending.on_delivery(KafkaError(KafkaError._QUEUE_FULL), None)
        try:
            await asyncio.wait_for(asyncio.shield(pending.future), self._timeout + 1)
            self._all_brokers_down_since = None
        except TimeoutError:
            raise KafkaUnavailable(
                f"no acknowledgement from Kafka within {self._timeout:.0f}s", queued=produced
            ) from None
        except KafkaUnavailable as exc:
            raise KafkaUnavailable(str(exc), queued=produced) from None

    def reachable(self, timeout_s: float = 2.0) -> bool:
        """A metadata round trip to the cluster succeeds (blocks up to ``timeout_s``)."""
        try:
            self._producer.list_topics(timeout=timeout_s)
        except KafkaException:
            return False
        self._all_brokers_down_since = None
        return True

    async def probe(self, timeout_s: float = 2.0) -> bool:
        """:meth:`reachable` in a worker thread, never on the event loop.

        Concurrent callers (health checks of several load balancers) share the
        probe in flight, so a slow cluster costs one thread, not one per caller.
        """
        if self._probe is None or self._probe.done():
            self._probe = asyncio.ensure_future(asyncio.to_thread(self.reachable, timeout_s))
        return await asyncio.shield(self._probe)

    def close(self, timeout_s: float = 30.0) -> int:
        """Flush what is queued (graceful shutdown); return the records left undelivered."""
        left = self._producer.flush(timeout_s)
        self._stop.set()
        self._poller.join(timeout=5)
        del self._producer  # destroy the librdkafka client: no reconnects after shutdown
        return left
