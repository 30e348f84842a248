"""The collector's producer face: what a request that stopped waiting leaves behind."""

from __future__ import annotations

import asyncio
import gc
import logging

import pytest
from confluent_kafka import KafkaError

from ingest.producer import KafkaUnavailable, _Pending


def test_a_failure_reported_after_the_request_stopped_waiting_is_not_logged_as_lost(
    caplog: pytest.LogCaptureFixture,
):
    async def request_that_times_out() -> _Pending:
        pending = _Pending(asyncio.get_running_loop(), count=1)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(pending.future), 0.01)
        # librdkafka reports the record's failure later, from its poll thread.
        pending.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)
        await asyncio.sleep(0)  # the loop runs the report's callback
        assert pending.future.done()
        return pending

    with caplog.at_level(logging.ERROR, logger="asyncio"):
        pending = asyncio.run(request_that_times_out())
        del pending
        gc.collect()
    assert "never retrieved" not in caplog.text


def test_a_request_that_waits_gets_the_failure():
    async def request() -> None:
        pending = _Pending(asyncio.get_running_loop(), count=2)
        pending.on_delivery(None, None)
        pending.on_delivery(KafkaError(KafkaError._MSG_TIMED_OUT), None)
        await pending.future

    with pytest.raises(KafkaUnavailable, match="Message timed out"):
        asyncio.run(request())
