"""A Kappa switch that stops half way is completed, never left frozen: whichever statement
fails, after the next poll (or the job's next start) serving reads the version that is being
written and the old run's query is stopped.

The speed job runs in this process (:class:`speed_layer.service.SpeedService` on the tests'
Spark session); the failure is injected through the service's ``on_switch_step`` hook, which
the switch calls before each of its statements.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from pipelines.simulators import checkouts as shop
from speed_layer.replay import SWITCH_STEPS
from tests.support.checkouts import (
    CHECKOUTS,
    checkout_records,
    orders_counted,
    streaming_checkouts,
)
from tests.support.isolation import (
    Seen,
    publish_boundary,
    seen,
    serving_api,
    with_own_serving,
)
from tests.support.speed import SpeedThread
from tests.support.web import WEB_EVENTS, WEB_VIEWS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class FailOnce:
    """Raise before the switch's ``step`` the first time it comes."""

    def __init__(self, step: str) -> None:
        self.step, self.failed = step, False

    def __call__(self, step: str) -> None:
        if step == self.step and not self.failed:
            self.failed = True
            raise RuntimeError(f"injected failure before the switch's {step!r} statement")


@pytest.fixture
def switch_settings(replay_settings):
    """Switch as soon as the replay reports progress (its lag is what it is)."""
    speed = replay_settings.speed.model_copy(
        update={"replay_max_lag": 1_000_000, "replay_sustain_s": 0.0, "replay_grace_s": 600.0}
    )
    return replay_settings.model_copy(update={"speed": speed})


def _events(seed: int, minutes_ago: int):
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=minutes_ago)
    return generate(SimulatorConfig(seed=seed, events=60, rate=1.0, start=start))


def _switch_fails_at(step, spark, settings, wait_for):
    """A live service whose replay has caught up and whose switch failed before ``step``."""
    from speed_layer.replay import request_replay
    from speed_layer.service import SpeedService

    service = SpeedService(spark, settings, WEB_EVENTS, on_switch_step=FailOnce(step))
    service.start()
    old = service.queries[service.live.generation]
    replay = request_replay(settings, "earliest", views=WEB_VIEWS)
    service.poll()  # starts the replay's query
    wait_for(lambda: service.recorder.replay_progress_at is not None, 180, "the replay's progress")
    with pytest.raises(RuntimeError, match="injected failure"):
        service.poll()  # caught up: the switch, interrupted
    return service, old, replay


@pytest.fixture
def reads_new_version(speed_version, read_view, cassandra_session, wait_for):
    """``reads_new_version(service, old, replay, settings, events)``: after the switch,
    serving reads the replay's version, which its query writes (new events counted)."""

    def check(service, old, replay, settings, events):
        _assert_serving_reads_the_version_being_written(
            service, old, replay, settings, events, speed_version, read_view, cassandra_session,
            wait_for,
        )  # fmt: skip

    return check


def _assert_serving_reads_the_version_being_written(
    service, old, replay, settings, events, speed_version, read_view, cassandra_session, wait_for
):
    assert {speed_version(settings, spec.name) for spec in WEB_VIEWS} == {replay.version}
    assert set(service.queries) == {replay.generation}
    assert service.queries[replay.generation].isActive
    assert old is None or not old.isActive
    assert service.recorder.live_query == replay.query_name
    runs = cassandra_session.execute(
        f"SELECT generation, state FROM {settings.cassandra.keyspace}.speed_runs"
    )
    assert {r.generation: r.state for r in runs} == {0: "retired", replay.generation: "live"}

    more = _events(seed=82, minutes_ago=2)
    produce_direct(more, settings)
    expected = build_truth(events + more).valid_events

    def counted() -> bool:
        rows = read_view(settings, "site_activity").values()  # the version serving reads
        return sum(row.events for row in rows) == expected

    wait_for(counted, 180, "new events in the version serving reads")


@pytest.mark.parametrize("step", [*SWITCH_STEPS, "stop"])
def test_a_switch_interrupted_before_any_statement_is_completed_by_the_next_poll(
    step, spark, switch_settings, reads_new_version, wait_for
):
    settings = switch_settings
    events = _events(seed=81, minutes_ago=6)
    produce_direct(events, settings)
    service, old, replay = _switch_fails_at(step, spark, settings, wait_for)
    try:
        service.poll()
        reads_new_version(service, old, replay, settings, events)
    finally:
        service.stop()
        service.close()


@pytest.mark.parametrize("step", ["pointers", "retire", "promote"])
def test_a_job_that_died_in_the_middle_of_a_switch_completes_it_when_it_starts(
    step, spark, switch_settings, reads_new_version, wait_for
):
    from speed_layer.service import SpeedService

    settings = switch_settings
    events = _events(seed=83, minutes_ago=6)
    produce_direct(events, settings)
    died, _, replay = _switch_fails_at(step, spark, settings, wait_for)
    died.stop()  # the process is gone: so are its queries
    died.close()

    service = SpeedService(spark, settings, WEB_EVENTS)
    try:
        service.start()
        reads_new_version(service, None, replay, settings, events)
    finally:
        service.stop()
        service.close()


def test_a_replay_whose_query_failed_to_start_is_started_at_a_later_poll(
    spark, switch_settings, kafka_topic, reads_new_version, read_view, cassandra_session, wait_for
):
    """Finding 1 of the pipelines' isolation: the replay was recorded as started before its
    query was; a start that raised (a schema-agreement timeout) was never tried again, and
    the live query, let go while a replay "ran", left the pipeline with no query at all.

    The checkouts pipeline streams in the same Spark application meanwhile, as the job runs
    it (a session of its own): what its users see (its speed rows, runs and version, its
    published boundary, serving's answers and health verdict for it) is as it was before
    the start failed, once it failed and once the replay switched, and it goes on counting."""
    from speed_layer.replay import request_replay
    from speed_layer.service import SpeedService

    settings = with_own_serving(streaming_checkouts(switch_settings, kafka_topic, ["checkouts"]))
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    orders = checkout_records(seed=91, start=now - timedelta(minutes=20))
    shop.produce(orders, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))
    publish_boundary(cassandra_session, settings, "orders_by_currency", now - timedelta(hours=1))
    span = (now - timedelta(minutes=30), now + timedelta(minutes=10))
    events = _events(seed=84, minutes_ago=6)
    produce_direct(events, settings)
    with SpeedThread(spark, settings) as other, serving_api(settings) as api:
        counted = orders_counted(read_view, settings, shop.build_truth(orders))

        def settled() -> Seen | None:
            if not counted():
                return None
            found = seen(cassandra_session, settings, CHECKOUTS, api=api, span=span)
            return found if found.fresh else None

        before = wait_for(settled, 180, "the checkouts pipeline's orders, served", other)
        service = SpeedService(spark, settings, WEB_EVENTS, on_switch_step=FailOnce("start"))
        try:
            service.start()
            old = service.queries[service.live.generation]
            replay = request_replay(settings, "earliest", views=WEB_VIEWS)
            service.poll()  # the start fails
            assert service.replay is None and set(service.queries) == {service.live.generation}
            assert old.isActive, "the live query goes on while the replay cannot start"
            after = seen(cassandra_session, settings, CHECKOUTS, api=api, span=span)
            assert before.changes(after) == {}, "checkouts, once web events' replay failed"

            def switched() -> bool:
                service.poll()  # tried again after its wait, then caught up and switched
                return service.live.generation == replay.generation

            wait_for(switched, 180, "the replay started again and switched", other)
            reads_new_version(service, old, replay, settings, events)
            after = seen(cassandra_session, settings, CHECKOUTS, api=api, span=span)
            assert before.changes(after) == {}, "checkouts, once web events' replay switched"
        finally:
            service.stop()
            service.close()
        more = checkout_records(seed=92, start=now - timedelta(minutes=2), events=40)
        shop.produce(more, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))
        counted = orders_counted(read_view, settings, shop.build_truth(orders + more))
        wait_for(counted, 180, "the checkouts pipeline's new orders", other)


def test_a_view_added_after_a_switch_is_served_from_the_version_the_live_run_writes(
    spark, switch_settings, speed_version, read_view, wait_for
):
    """Finding 2 of the pipelines' isolation: only a switch wrote ``speed_versions``, so a
    view added after one had no pointer and was served from version 0 (empty) while the live
    run wrote ``speed_v<N>_<view>``."""
    from speed_layer.replay import request_replay
    from speed_layer.service import SpeedService

    settings = switch_settings
    before = tuple(spec for spec in WEB_VIEWS if spec.name != "clicks")
    produce_direct(_events(seed=85, minutes_ago=6), settings)
    service = SpeedService(spark, settings, WEB_EVENTS, views=before)
    try:
        service.start()
        replay = request_replay(settings, "earliest", views=before)

        def switched() -> bool:
            service.poll()
            return service.live.generation == replay.generation

        wait_for(switched, 180, "the replay of the views without clicks switched")
    finally:
        service.stop()
        service.close()
    assert speed_version(settings, "clicks") == 0  # no pointer: the switch did not know it

    service = SpeedService(spark, settings, WEB_EVENTS)  # the next release adds clicks
    try:
        assert speed_version(settings, "clicks") == replay.version
        service.start()
        produce_direct(_events(seed=86, minutes_ago=2), settings)  # 6 clicks
        wait_for(lambda: read_view(settings, "clicks"), 180, "clicks served from version N")
    finally:
        service.stop()
        service.close()
