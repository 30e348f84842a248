"""A person forgotten while the speed layer runs is gone from what it serves: the windows
they were counted in are recounted without them by a replay the speed job asks for itself,
and their later events are not counted at all.

Before, the speed layer knew nothing of forgets: its rows (and their distinct-user sketches)
kept counting the person for as long as the windows stayed after the batch boundary (up to
the speed TTL, three days), and a producer pipeline's new events of theirs were counted too.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.suppressions import SuppressionRequest, record_suppression
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.speed import SpeedThread

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _of(user: str, event) -> bool:
    payload = event.payload
    return isinstance(payload, dict) and user in (payload.get("userId"), payload.get("anonymousId"))


def _as(person: str, events, every: int = 5):
    """``events`` with every ``every``-th page view or track call (each copy of it) sent by
    ``person``, an anonymous visitor."""
    ids = {
        e.payload["messageId"]
        for i, e in enumerate(events)
        if i % every == 0
        and e.defect is None
        and isinstance(e.payload, dict)
        and e.payload.get("type") in ("page", "track")
    }
    for event in events:
        if isinstance(event.payload, dict) and event.payload.get("messageId") in ids:
            event.payload["anonymousId"] = person
            event.payload.pop("userId", None)
    return events


def _most_active(events) -> str:
    """The anonymousId with the most valid events (a visitor in many windows)."""
    counts: dict[str, int] = {}
    for event in events:
        if event.defect is None and isinstance(event.payload, dict):
            who = event.payload.get("anonymousId")
            counts[who] = counts.get(who, 0) + 1
    return max(counts, key=counts.__getitem__)


def test_a_forgotten_person_is_recounted_out_of_the_speed_views(
    replay_settings, spark, cassandra_session, views_match_truth, speed_version, wait_for
):
    speed = replay_settings.speed.model_copy(update={"forget_recount_after_s": 1.0})
    settings = replay_settings.model_copy(update={"speed": speed})
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    history = generate(
        SimulatorConfig(seed=51, events=900, rate=3.0, users=40, start=now - timedelta(minutes=8))
    )
    person = _most_active(history)
    assert sum(_of(person, e) for e in history) >= 10
    produce_direct(history, settings)
    site = f"{settings.cassandra.keyspace}.speed_site_activity"

    def counted(truth):
        def check() -> bool:
            rows = cassandra_session.execute(f"SELECT events FROM {site}")
            return sum(r.events for r in rows) == truth.valid_events

        return check

    with SpeedThread(spark, settings) as job:
        wait_for(counted(build_truth(history)), 240, "the history to be counted", job)

        record_suppression(
            settings.kafka, SuppressionRequest(person, datetime.now(UTC), "test-forget")
        )
        wait_for(
            lambda: speed_version(settings, "site_activity") == 1,
            240,
            "the speed job to replay without the forgotten person and switch",
            job,
        )
        site = f"{settings.cassandra.keyspace}.speed_v1_site_activity"
        # Their events sent after the forget reach the topic (a producer pipeline's would),
        # and are not counted.
        later = _as(
            person,
            generate(
                SimulatorConfig(seed=52, events=300, rate=20.0, users=40, start=datetime.now(UTC))
            ),
        )
        assert sum(_of(person, e) for e in later) >= 10
        produce_direct(later, settings)
        truth = build_truth([e for e in history + later if not _of(person, e)])
        wait_for(counted(truth), 240, "every event but the person's to be counted", job)

    views_match_truth(truth, settings)
