"""Asking for a Kappa replay: what is refused, what is recorded, what is dropped and when."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_VIEWS

pytestmark = pytest.mark.integration


def _tables(session, keyspace: str) -> set[str]:
    rows = session.execute(
        "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (keyspace,)
    )
    return {row.table_name for row in rows}


def test_one_replay_at_a_time_and_an_abandoned_one_is_dropped_after_its_grace(
    replay_settings, cassandra_session
):
    from speed_layer.replay import ReplayRefused, abandon_replay, drop_superseded, request_replay
    from speed_layer.reset import ResetRefused, reset
    from speed_layer.start import ABANDONED, REPLAYING, pending_replay, read_runs

    settings, keyspace = replay_settings, replay_settings.cassandra.keyspace
    first = request_replay(settings, "earliest", views=WEB_VIEWS)
    assert (first.generation, first.version, first.state, first.floor) == (1, 1, REPLAYING, None)
    assert {"speed_v1_clicks", "speed_v1_clicks_by_minute"} <= _tables(cassandra_session, keyspace)
    assert pending_replay(cassandra_session, settings).generation == first.generation

    with pytest.raises(ReplayRefused, match="already catching up"):
        request_replay(settings, "earliest", views=WEB_VIEWS)
    with pytest.raises(ResetRefused, match="abandon it first"):
        reset(settings, "earliest", force=True, views=WEB_VIEWS)

    assert abandon_replay(settings).generation == first.generation
    assert pending_replay(cassandra_session, settings) is None
    (run,) = [r for r in read_runs(cassandra_session, settings) if r.generation == 1]
    assert run.state == ABANDONED and run.retired_at is not None

    # Kept through the grace period (a reader may still hold it), dropped after it.
    assert drop_superseded(cassandra_session, settings, WEB_VIEWS) == []
    later = datetime.now(UTC) + timedelta(seconds=settings.speed.replay_grace_s + 1)
    assert drop_superseded(cassandra_session, settings, WEB_VIEWS, now=later) == [1]
    assert not {t for t in _tables(cassandra_session, keyspace) if t.startswith("speed_v1_")}
    assert "speed_clicks" in _tables(cassandra_session, keyspace)  # the live version stays

    # The next replay takes the next version: a dropped one is never reused.
    assert request_replay(settings, "earliest", views=WEB_VIEWS).version == 2


def test_a_replay_that_would_leave_a_hole_before_the_boundary_is_refused(
    replay_settings, cassandra_session
):
    from layout import PointerTables
    from speed_layer.replay import ReplayRefused, request_replay

    settings = replay_settings
    start = datetime.now(UTC) - timedelta(hours=2)
    produce_direct(generate(SimulatorConfig(seed=3, events=50, start=start)), settings)
    boundary = start.replace(minute=0, second=0, microsecond=0)
    insert = cassandra_session.prepare(PointerTables(settings.cassandra.keyspace).insert_boundary)
    for view in ("page_activity", "site_activity", "clicks", "search_terms"):
        cassandra_session.execute(insert, (view, boundary, 1, "test", datetime.now(UTC)))

    # From an hour ago: windows between the boundary and then would be missing.
    an_hour_ago = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    with pytest.raises(ReplayRefused, match="miss the windows in between"):
        request_replay(settings, an_hour_ago, views=WEB_VIEWS)
    forced = request_replay(settings, an_hour_ago, force=True, views=WEB_VIEWS)
    assert forced.floor is not None and forced.floor > boundary


def test_a_reset_under_a_live_job_is_refused_and_another_pipeline_s_job_does_not_count(
    replay_settings, cassandra_session
):
    from layout import PointerTables
    from speed_layer.reset import ResetRefused, reset

    settings = replay_settings
    pointers = PointerTables(settings.cassandra.keyspace)
    beat = cassandra_session.prepare(pointers.update_heartbeat)
    # Another pipeline's view beating now: its job runs on its own, so no refusal.
    cassandra_session.execute(beat, (datetime.now(UTC), "orders_by_currency"))
    assert reset(settings, "earliest", views=WEB_VIEWS).generation >= 1

    # One of this pipeline's views beating now: its job is alive.
    cassandra_session.execute(beat, (datetime.now(UTC), WEB_VIEWS[0].name))
    with pytest.raises(ResetRefused, match="stop the job first"):
        reset(settings, "earliest", views=WEB_VIEWS)
    assert reset(settings, "earliest", force=True, views=WEB_VIEWS).generation >= 1


def test_a_switch_and_an_abandon_of_one_replay_cannot_both_win(replay_settings, cassandra_session):
    """The abandon read the replay as catching up, then wrote its state: one that came after
    the switch's intent turned the switching run to abandoned, and once the switch had
    retired the live run no run was live (reads fell back to generation 0). Both are now
    conditional on the run's state (a lightweight transaction): the first one wins."""
    from layout import read_speed_versions
    from speed_layer.replay import ReplayAbandoned, abandon_replay, request_replay, switch
    from speed_layer.start import (
        ABANDONED,
        REPLAYING,
        SWITCHING,
        current_start,
        read_runs,
        update_run,
    )

    settings = replay_settings

    def state(generation: int) -> str:
        (run,) = [r for r in read_runs(cassandra_session, settings) if r.generation == generation]
        return run.state

    # The switch recorded its intent first: the abandon is too late, the run stays switching.
    first = request_replay(settings, "earliest", views=WEB_VIEWS)
    assert update_run(
        cassandra_session, settings, first.generation, expect=REPLAYING, state=SWITCHING
    )
    assert abandon_replay(settings) is None
    assert state(first.generation) == SWITCHING

    # The abandon came first: the switch is refused and moves no pointer.
    update_run(cassandra_session, settings, first.generation, state=ABANDONED)
    second = request_replay(settings, "earliest", views=WEB_VIEWS)
    assert abandon_replay(settings).generation == second.generation
    live = current_start(cassandra_session, settings)
    with pytest.raises(ReplayAbandoned):
        switch(cassandra_session, settings, live, second, WEB_VIEWS)
    assert state(second.generation) == ABANDONED
    pointed = read_speed_versions(
        cassandra_session, settings.cassandra.keyspace, [v.name for v in WEB_VIEWS]
    )
    assert second.version not in pointed.values()
