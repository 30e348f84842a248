"""The reconciliation on the real platform: the layers agree, rows lost from the speed tables
behind the platform's back are found and alerted on, and a Kappa replay repairs them.

The speed layer runs what ``python -m speed_layer`` runs (its service loop, the replay's
switch included) in a thread of this process; the batch pipeline and the ``reconcile``
step run in this process too, as the DAG tasks' code. The traffic has duplicates, skewed
clocks, out-of-order and invalid events, and events later than the speed layer's watermark
when they arrive: the speed layer drops them, the batch layer counts them, and that is no
drift.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from batch_layer.runner import EXIT_DRIFT, run_step, run_steps
from core.settings import Settings
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from layout import PointerTables, ViewTables, read_reconcile_results
from tests.support.speed import SpeedThread
from tests.support.speed import wait_until as wait_for
from tests.support.speed import with_short_replays as replay_settings
from tests.support.web import WEB_EVENTS
from views import view

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

MINUTE = 60_000
LATE_BY_S = 1200
"""Late events happened 20 minutes before they are sent: more than the watermark (10)."""


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _minute(moment: datetime) -> int:
    return _ms(moment) - _ms(moment) % MINUTE


def _expected_watermark(events) -> int:
    return _ms(max(e.time for e in events if e.defect is None)) - 600_000


def _speed_caught_up(session, settings: Settings, watermark_ms: int):
    """True once every view's progress shows no Kafka lag and a watermark at least
    ``watermark_ms`` (the speed layer has read and closed what was produced)."""
    keyspace = settings.cassandra.keyspace
    select = session.prepare(PointerTables(keyspace).select_freshness_ms)

    def check() -> bool:
        for spec in WEB_EVENTS.view_specs:
            row = session.execute(select, (spec.name,)).one()
            if row is None or row[1] is None or row[1] < watermark_ms or row[3] != 0:
                return False
        return True

    return check


def _health(settings: Settings) -> dict:
    from core.cassandra import connect
    from serving.query import Queries
    from serving.store import ServingStore

    async def ask() -> dict:
        cluster, session = connect(settings.cassandra)
        try:
            store = ServingStore(session, settings.cassandra.keyspace, pointer_cache_s=0)
            return await Queries(store).health()
        finally:
            cluster.shutdown()

    return asyncio.run(ask())


def _damage(session, settings: Settings, lo: int, hi: int, late_minutes: set[int]) -> dict:
    """Delete every page_activity row of three windows in ``[lo, hi)`` and add one click to a
    clicks row of another, in the speed tables, behind the platform's back. Returns the
    windows touched per view."""
    keyspace = settings.cassandra.keyspace
    pages = ViewTables(view("page_activity"), keyspace, "speed")
    clicks = ViewTables(view("clicks"), keyspace, "speed")
    keys_of = session.prepare(pages.select_minute([]))
    delete_key = session.prepare(
        f"DELETE FROM {pages.by_key} WHERE path = ? AND day = ? AND window_start = ?"
    )
    delete_minute = session.prepare(pages.delete_minute())
    clicks_of = session.prepare(clicks.select_minute(["clicks"]))
    add_click = session.prepare(
        f"UPDATE {clicks.by_minute} SET clicks = ? WHERE window_start = ? AND target = ?"
    )
    touched: dict[str, list[int]] = {"page_activity": [], "clicks": []}
    for window in range(lo, hi, MINUTE):
        if window in late_minutes:
            continue
        start = datetime.fromtimestamp(window / 1000, UTC)
        paths = [r.path for r in session.execute(keys_of, (start,))]
        if paths and len(touched["page_activity"]) < 3:
            for path in paths:
                session.execute(delete_key, (path, start.date(), start))
            session.execute(delete_minute, (start,))
            touched["page_activity"].append(window)
            continue
        rows = list(session.execute(clicks_of, (start,)))
        if rows and not touched["clicks"]:
            target, count = rows[0]
            session.execute(add_click, (count + 1, start, target))
            touched["clicks"].append(window)
    assert len(touched["page_activity"]) == 3 and len(touched["clicks"]) == 1, touched
    return touched


def test_rows_lost_from_the_speed_layer_are_found_and_a_replay_repairs_them(
    spark, pipeline_settings, run_pipeline, cassandra_session, capsys
):
    from speed_layer.replay import request_replay

    settings = replay_settings(
        pipeline_settings.model_copy(
            update={"batch": pipeline_settings.batch.model_copy(update={"period": "minute"})}
        )
    )
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    history = generate(
        SimulatorConfig(
            seed=23,
            events=1600,
            rate=1.0,  # about 27 minutes, ending 13 minutes ago
            start=now - timedelta(minutes=40),
            duplicate_rate=0.03,
            late_rate=0.05,
            late_by_s=LATE_BY_S,
            out_of_order_rate=0.2,
            skewed_client_rate=0.1,
            invalid_rate=0.02,
        )
    )
    split = now - timedelta(minutes=25)
    first = [e for e in history if e.sent_at < split]
    second = [e for e in history if e.sent_at >= split]
    # Minutes touched by events received more than 8 minutes after they happened.
    late_minutes = {_minute(e.time) for e in history if e.sent_at - e.time > timedelta(minutes=8)}
    assert late_minutes and second

    with SpeedThread(spark, settings) as job:
        # The first half, then the second once the speed layer closed the first half's
        # windows: its late events (20 minutes old) are behind the watermark and dropped.
        produce_direct(first, settings)
        wait_for(
            _speed_caught_up(cassandra_session, settings, _expected_watermark(first)),
            300,
            "the speed layer to read the first half",
            job,
        )
        produce_direct(second, settings)
        wait_for(
            _speed_caught_up(cassandra_session, settings, _expected_watermark(history)),
            120,
            "the speed layer to read the second half",
            job,
        )
        dropped = cassandra_session.execute(
            f"SELECT late_rows_dropped FROM {settings.cassandra.keyspace}.speed_progress "
            "WHERE view_name = 'site_activity'"
        ).one()
        assert dropped.late_rows_dropped > 0  # the speed layer did drop late events
        run_pipeline(settings, "batch-1")

        # The layers agree: nothing differs, the rows the late events touched are skipped.
        agreed = run_step(spark, settings, "reconcile", WEB_EVENTS, "reconcile-1", None)
        assert agreed.passed
        for name, result in agreed.views.items():
            assert result["windows_compared"] > 0, (name, result)
            assert result["windows_differing"] == 0 and result["rows_differing"] == 0, result
        assert agreed.views["site_activity"]["rows_skipped_late"] > 0
        assert agreed.views["page_activity"]["rows_compared"] > 50
        resumed = agreed.views["page_activity"]["resume_at"]
        assert resumed <= _expected_watermark(history)

        # Newer traffic closes the rest of the history in both layers.
        recent = generate(SimulatorConfig(seed=24, events=200, rate=50.0, start=datetime.now(UTC)))
        produce_direct(recent, settings)
        wait_for(
            _speed_caught_up(cassandra_session, settings, _expected_watermark(recent)),
            120,
            "the speed layer to read the newer traffic",
            job,
        )
        run_pipeline(settings, "batch-2")

        # Rows lost behind the platform's back, in windows not compared yet.
        end = _minute(max(e.time for e in history))
        touched = _damage(cassandra_session, settings, resumed, end, late_minutes)
        summary, code = run_steps(spark, settings, ("reconcile",), WEB_EVENTS, "reconcile-2")
        assert code == EXIT_DRIFT, summary
        report = capsys.readouterr().err
        assert "# Reconciliation of web_events: DRIFT" in report
        assert "## page_activity: 3 of" in report and "## clicks: 1 of" in report
        assert "only in batch" in report
        assert "python -m speed_layer replay --from earliest" in report
        results = read_reconcile_results(
            cassandra_session, settings.cassandra.keyspace, WEB_EVENTS.views
        )
        assert results["page_activity"]["windows_differing"] == 3
        assert results["page_activity"]["largest_difference"] == 1.0
        assert not results["page_activity"]["passed"] and results["clicks"]["passed"] is False
        assert results["clicks"]["windows_differing"] == 1
        assert results["site_activity"]["windows_differing"] == 0
        assert results["site_activity"]["passed"]
        damaged = results["page_activity"]
        assert damaged["window_from"] <= min(touched["page_activity"]) < damaged["window_to"]
        health = _health(settings)
        assert health["status"] == "degraded", health
        assert "page_activity" in health["message"] and "replay" in health["message"]

        # A replay from the start of the log rebuilds the views into version 1 and switches.
        replay = request_replay(
            WEB_EVENTS.stream_settings(settings), "earliest", views=WEB_EVENTS.view_specs
        )
        assert replay.version == 1
        wait_for(
            lambda: _speed_version(cassandra_session, settings) == 1,
            300,
            "the replay to switch",
            job,
        )
        wait_for(
            _speed_caught_up(cassandra_session, settings, _expected_watermark(recent)),
            120,
            "the replay's progress",
            job,
        )
        repaired = run_step(spark, settings, "reconcile", WEB_EVENTS, "reconcile-3", None)

    # The same windows compared again, against the new version: no drift left.
    assert repaired.passed
    pages = repaired.views["page_activity"]
    assert pages["speed_version"] == 1
    assert pages["window_from"] == agreed.views["page_activity"]["window_to"]
    assert pages["windows_compared"] >= damaged["windows_compared"]
    for result in repaired.views.values():
        assert result["windows_differing"] == 0, result
    results = read_reconcile_results(
        cassandra_session, settings.cassandra.keyspace, WEB_EVENTS.views
    )
    assert all(r["passed"] and r["windows_differing"] == 0 for r in results.values())
    assert _health(settings)["status"] == "ok"


def _speed_version(session, settings: Settings) -> int:
    from layout import read_speed_versions

    return read_speed_versions(session, settings.cassandra.keyspace, ["page_activity"])[
        "page_activity"
    ]
