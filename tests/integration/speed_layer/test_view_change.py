"""A view's definition changes (a new measure over the contract's v1.1 field
``properties.engaged_ms``) and goes live through a Kappa replay: the new measure is served for
the whole retained log, not only from the deploy on."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS
from views.page_activity import SPEC as PAGE_ACTIVITY
from views.spec import Measure

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MINUTE = 60_000


def build_with_engagement(events):
    """``page_activity`` as the next release defines it: ``engaged_sum`` added."""
    from pyspark.sql import functions as F

    from views.common import minute_window, visitors_sketch, window_start

    path = F.coalesce(F.col("properties.path"), F.col("context.page.path"))
    load = F.col("properties.load_time_ms")
    pages = events.where(F.col("type") == "page").withColumn("_path", path)
    return (
        pages.where(F.col("_path").isNotNull())
        .groupBy(minute_window(), F.col("_path").alias("path"))
        .agg(
            F.count(F.lit(1)).alias("page_views"),
            visitors_sketch().alias("visitors"),
            F.count(load).alias("load_count"),
            F.sum(load).alias("load_sum"),
            F.max(load).alias("load_max"),
            F.kll_sketch_agg_double(load).alias("load_sketch"),
            F.sum(F.col("properties.engaged_ms")).alias("engaged_sum"),
        )
        .select(window_start(), *NEXT_RELEASE.columns[1:])
    )


NEXT_RELEASE = replace(
    PAGE_ACTIVITY,
    measures=(
        *PAGE_ACTIVITY.measures,
        Measure("engaged_sum", "sum", "Time the page was visible and in use, ms (contract 1.1)."),
    ),
    build=build_with_engagement,
)


class Running:
    """A :class:`SpeedService` of the given views, supervised in a thread (as the job runs)."""

    def __init__(self, spark, settings, views) -> None:
        from speed_layer.service import SpeedService

        self.service = SpeedService(spark, settings, WEB_EVENTS, views=views)
        self.stopping = threading.Event()
        self.failed: list = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.failed = self.service.supervise(self.stopping, poll_s=0.5)

    def __enter__(self) -> Running:
        self.service.start()
        self.thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self.stopping.set()
        self.thread.join(60)
        self.service.stop()
        self.service.close()
        assert not self.failed, [q.exception() for q in self.failed]


def with_engagement(events) -> None:
    """Page views as a client of contract 1.1 sends them: some report ``engaged_ms``."""
    for i, event in enumerate(events):
        properties = event.payload.get("properties")
        if event.payload.get("type") == "page" and isinstance(properties, dict) and i % 3:
            properties["engaged_ms"] = float(500 + 37 * (i % 200))


def engagement(events) -> tuple[dict[tuple[str, str], float], int]:
    """The truth of ``engaged_sum``: per (minute, path), the engaged time of the page views
    that reported one; and how many page views reported a load time (to wait for)."""
    from ingest.simulator.clock import minute_key

    engaged: dict[tuple[str, str], float] = defaultdict(float)
    seen, loads = set(), 0
    for event in events:
        payload = event.payload
        if event.defect or payload.get("type") != "page" or payload["messageId"] in seen:
            continue
        seen.add(payload["messageId"])
        properties = payload.get("properties") or {}
        if "engaged_ms" in properties:
            engaged[(minute_key(event.time), properties.get("path"))] += properties["engaged_ms"]
        loads += "load_time_ms" in properties
    return dict(engaged), loads


def served_engagement(settings, paths, lo: int, hi: int) -> dict[tuple[str, str], float | None]:
    """``engaged_sum`` per (minute, path) as serving answers it (buckets with page views)."""

    async def ask():
        from core.cassandra import connect
        from serving.query import Queries
        from serving.store import ServingStore

        cluster, session = connect(settings.cassandra)
        try:
            store = ServingStore(session, settings.cassandra.keyspace, views=(NEXT_RELEASE,))
            queries = Queries(store)
            found = {}
            for i in range(0, len(paths), 20):
                keys = [(p,) for p in paths[i : i + 20]]
                answer = await queries.timeseries(
                    "page_activity", keys, lo, hi, measures=["engaged_sum", "page_views"]
                )
                for series in answer["series"]:
                    for bucket in series["buckets"]:
                        if bucket["page_views"]:
                            key = (bucket["start"], series["key"]["path"])
                            found[key] = bucket["engaged_sum"]
            return found, answer["speed_version"]["page_activity"]
        finally:
            cluster.shutdown()

    return asyncio.run(ask())


def test_a_new_measure_is_served_for_the_whole_log_after_a_replay(
    spark, replay_settings, cassandra_session, speed_version, wait_for
):
    from layout import create_tables
    from speed_layer.replay import request_replay

    settings = replay_settings
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)
    events = generate(SimulatorConfig(seed=53, events=1200, rate=4.0, start=start, pages=30))
    with_engagement(events)
    produce_direct(events, settings)
    truth, loads = engagement(events)
    paths = sorted({path for _, path in truth})
    lo, hi = int(start.timestamp() * 1000), int(time.time() * 1000) // MINUTE * MINUTE + MINUTE
    page_rows = f"{settings.cassandra.keyspace}.speed_page_activity"

    # The release before: page_activity without engaged_sum, live.
    with Running(spark, settings, (PAGE_ACTIVITY,)):
        wait_for(
            lambda: sum(
                r.load_count
                for r in cassandra_session.execute(f"SELECT load_count FROM {page_rows}")
            )
            >= loads,
            240,
            "the live run to count the log",
        )

    # The next release is deployed: its tables gain the column; the live run writes the new
    # measure only for what it reads from now on, so older windows do not have it yet.
    create_tables(settings, (NEXT_RELEASE,))
    before, version = served_engagement(settings, paths, lo, hi)
    assert version == 0
    assert truth.keys() <= before.keys()
    assert all(value is None for value in before.values())

    replay = request_replay(settings, "earliest", views=(NEXT_RELEASE,))
    assert replay.version == 1
    with Running(spark, settings, (NEXT_RELEASE,)):
        wait_for(
            lambda: speed_version(settings, "page_activity") == 1,
            300,
            "the replay to switch",
        )

    after, version = served_engagement(settings, paths, lo, hi)
    assert version == 1
    assert {k: v for k, v in after.items() if v is not None} == pytest.approx(truth)
    assert all(v is None for k, v in after.items() if k not in truth)
