"""The boundary never hides what the speed layer counted: events late by more than the batch
lateness but inside the speed watermark, arriving after a batch run fixed its end.

The speed layer runs what ``python -m speed_layer`` runs (its service loop, 10-minute
watermark) in a thread of this process; the batch pipeline runs in-process with a lateness
of 5 minutes and a minute period. All event times lie about 40 minutes in the past, so the
``as_of`` rule alone would put the boundary after every event. ``/late-a`` comes 7 minutes
before the newest event, after the first run; ``/late-c`` between the second run's bronze
(which reads the speed watermark before fixing its end) and its publish, and a newer event
then moves the watermark past it. Each late page has a path of its own: the merged answer
must count it once, from speed until a batch run read it from the log, from batch after.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from batch_layer.ledger import Ledger
from batch_layer.runner import run_step
from batch_layer.steps import THROUGH_PUBLISH
from core.settings import Settings
from ingest.simulator import format_ts
from ingest.simulator.direct import produce_payloads
from layout import read_boundaries, read_watermarks
from tests.support.speed import SpeedThread
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

MINUTE = timedelta(minutes=1)
WATERMARK = timedelta(minutes=10)
"""The speed layer's watermark delay (the default ``WAP_SPEED__WATERMARK``)."""


def _page(path: str, at: datetime, message_id: str) -> tuple[dict, datetime]:
    """A page call of ``path`` whose event time is exactly ``at`` (sent and received then)."""
    stamp = format_ts(at)
    call = {
        "type": "page",
        "messageId": message_id,
        "anonymousId": "gap-visitor",
        "properties": {"path": path},
        "originalTimestamp": stamp,
        "sentAt": stamp,
    }
    return call, at


def _served(settings: Settings, path: str, around: datetime) -> dict[datetime, tuple[int, str]]:
    """Minute -> (page views, source) of ``path`` as serving answers, non-zero minutes only."""
    from core.cassandra import connect
    from serving.query import Queries
    from serving.store import ServingStore
    from serving.timerange import to_ms

    async def ask() -> dict:
        cluster, session = connect(settings.cassandra)
        try:
            store = ServingStore(session, settings.cassandra.keyspace, pointer_cache_s=0)
            lo, hi = to_ms(around - 30 * MINUTE), to_ms(around + 30 * MINUTE)
            return await Queries(store).timeseries(
                "page_activity", [(path,)], lo, hi, "minute", measures=["page_views"]
            )
        finally:
            cluster.shutdown()

    buckets = asyncio.run(ask())["series"][0]["buckets"]
    return {
        datetime.fromisoformat(b["start"]): (b["page_views"], b["source"])
        for b in buckets
        if b["page_views"]
    }


def _wait(job, what: str, done: Callable[[], bool], timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if job.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s}s\n{job.log_tail()}")
        time.sleep(0.5)


def _watermark_reached(settings: Settings, at: datetime) -> bool:
    watermark = read_watermarks(settings.cassandra, ["page_activity"]).get("page_activity")
    return watermark is not None and watermark >= at


def _boundary(settings: Settings) -> datetime:
    return read_boundaries(settings.cassandra, ["page_activity"])["page_activity"].at


def test_a_late_event_inside_the_watermark_is_counted_at_every_moment_after_it_arrived(
    spark, pipeline_settings
):
    settings = pipeline_settings.model_copy(
        update={
            "batch": pipeline_settings.batch.model_copy(
                update={"lateness_s": 300, "period": "minute"}
            )
        }
    )
    newest = datetime.now(UTC).replace(second=0, microsecond=0) - 40 * MINUTE
    produce_payloads(
        [_page("/home", newest - m * MINUTE, f"home-{m}") for m in range(20, -1, -1)], settings
    )

    def produce(path: str, at: datetime) -> None:
        produce_payloads([_page(path, at, f"{path}-{at.isoformat()}")], settings)

    def watermark_reaches(at: datetime) -> None:
        _wait(job, f"speed watermark at {at}", lambda: _watermark_reached(settings, at))

    def counted(path: str, at: datetime, source: str) -> bool:
        return _served(settings, path, newest) == {at: (1, source)}

    def batch_run(run_id: str, after_each_step: Callable[[str], None]) -> None:
        for step in THROUGH_PUBLISH:
            run_step(spark, settings, step, WEB_EVENTS, run_id, None)
            after_each_step(step)

    # Late events: 7 minutes before the newest event (inside the watermark, older than
    # as_of - lateness), then one arriving between a run's bronze and its publish.
    late_a, late_c = newest - 7 * MINUTE, newest + 12 * MINUTE
    with SpeedThread(spark, settings) as job:
        watermark_reaches(newest - WATERMARK)
        batch_run("run-1", lambda step: None)

        produce("/late-a", late_a)
        _wait(job, "/late-a counted by speed", lambda: counted("/late-a", late_a, "speed"))
        # Held at the speed watermark, not at as_of - lateness (about NEWEST + 35 min).
        assert _boundary(settings) == newest - WATERMARK
        held = Ledger(spark, settings, WEB_EVENTS).last("publish").detail["held_by_speed"]
        assert set(held) == set(WEB_EVENTS.views)

        produce("/home", newest + 20 * MINUTE)
        watermark_reaches(newest + 10 * MINUTE)

        def run_2_step(step: str) -> None:
            if step == "bronze":
                # Bronze has fixed its end (and read the watermark, NEWEST + 10 min): a late
                # event, then a newer one moving the watermark past it before publish.
                produce("/late-c", late_c)
                _wait(job, "/late-c counted by speed", lambda: counted("/late-c", late_c, "speed"))
                produce("/home", newest + 25 * MINUTE)
                watermark_reaches(newest + 15 * MINUTE)
            if step != "publish":
                assert counted("/late-a", late_a, "speed"), step

        batch_run("run-2", run_2_step)
        assert counted("/late-c", late_c, "speed")  # run 2 did not read it from the log
        assert counted("/late-a", late_a, "batch")  # run 2 did
        assert _boundary(settings) == newest + 10 * MINUTE

        def run_3_step(step: str) -> None:
            if step != "publish":
                assert counted("/late-c", late_c, "speed"), step

        batch_run("run-3", run_3_step)
        assert counted("/late-c", late_c, "batch")
        assert counted("/late-a", late_a, "batch")
        assert _boundary(settings) == newest + 15 * MINUTE
