"""Two pipelines live in one speed job: each exact, each failing on its own.

The web pipeline's events and the checkout service's records go to their own topics; one
``python -m speed_layer`` streams both (each its own session, query, checkpoint and runs).
Both pipelines' speed views equal their ground truth. A checkouts checkpoint that cannot
be read stops the checkouts query only: web events keep being answered live, and the job
keeps running and tries checkouts again; a Kappa replay of checkouts, how a damaged
speed layer is repaired, rebuilds checkouts' views into a new version while web events stay
live on their own version and runs, and a reset of checkouts leaves those runs as they were.
"""

from __future__ import annotations

import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.settings import KafkaSettings, Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from pipelines import pipeline
from pipelines.simulators import checkouts as shop
from tests.support.checkouts import assert_orders_equal_truth
from tests.support.speed import speed_cli, with_short_replays

pytestmark = [pytest.mark.integration, pytest.mark.slow]

CHECKOUTS = pipeline("checkouts")


@pytest.fixture
def two_pipelines(speed_settings: Settings, kafka_topic: str) -> Settings:
    """``speed_settings`` streaming web events and checkouts, each from this test's topic."""
    from layout import create_tables

    kafka = KafkaSettings(
        **speed_settings.kafka.model_dump() | {"topics": {CHECKOUTS.name: kafka_topic}}
    )
    speed = speed_settings.speed.model_copy(
        update={"pipelines": ["web_events", "checkouts"], "restart_backoff_s": 2.0}
    )
    settings = speed_settings.model_copy(update={"kafka": kafka, "speed": speed})
    create_tables(settings, CHECKOUTS.view_specs)
    return settings


def _checkout_records(start: datetime, events: int = 400) -> list:
    return shop.generate(
        shop.CheckoutConfig(
            seed=7,
            events=events,
            start=start,
            rate=2.0,
            refund_rate=0.08,
            duplicate_rate=0.05,
            out_of_order_rate=0.1,
            invalid_rate=0.03,
        )
    )


def _assert_orders_match(read_view, settings: Settings, truth: shop.CheckoutTruth) -> None:
    from datasketches import hll_sketch

    rows = read_view(settings, "orders_by_currency")
    got = {
        (window.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00Z"), currency): row
        for (window, currency), row in rows.items()
    }
    assert_orders_equal_truth(got, truth)
    for key, cell in truth.by_minute.items():
        row = got[key]
        buyers = hll_sketch.deserialize(bytes(row.buyers)).get_estimate() if row.buyers else 0
        assert round(buyers) == len(cell.buyers), key  # HLL is exact at these sizes


def _now_minute() -> datetime:
    return datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=20)


def test_both_pipelines_stream_in_one_job_and_each_equals_its_truth(
    two_pipelines, speed_job, read_view, views_match_truth
):
    settings = two_pipelines
    start = _now_minute()
    web = generate(SimulatorConfig(seed=71, events=900, rate=5.0, start=start))
    orders = _checkout_records(start)
    produce_direct(web, settings)
    shop.produce(orders, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))

    speed_job.drain(settings)

    views_match_truth(build_truth(web), settings)
    _assert_orders_match(read_view, settings, shop.build_truth(orders))


def test_a_failing_pipeline_is_repaired_by_its_replay_while_the_other_stays_live(
    two_pipelines,
    speed_job,
    read_view,
    views_match_truth,
    speed_version,
    wait_for,
    cassandra_session,
):
    from speed_layer.start import read_runs

    settings = with_short_replays(two_pipelines)
    web_streams = pipeline("web_events").stream_settings(settings)
    start = _now_minute()
    orders = _checkout_records(start, events=200)
    shop.produce(orders, settings.kafka.client_config(), CHECKOUTS.topic_of(settings))
    before = generate(SimulatorConfig(seed=72, events=300, rate=5.0, start=start))
    produce_direct(before, settings)
    speed_job.drain(settings)  # checkouts has a checkpoint now ...
    web_runs = read_runs(cassandra_session, web_streams)

    runs = CHECKOUTS.stream_settings(settings).speed.checkpoint_name
    offsets = Path(settings.lake.checkpoint_root) / runs / "views/offsets"
    newest = max(offsets.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    newest.write_text("not an offset log\n")  # ... that cannot be read any more

    after = generate(SimulatorConfig(seed=73, events=400, rate=5.0, start=start))
    truth = build_truth(before + after)
    job = speed_job.start(settings)
    try:

        def logged(event: str):
            line = f'"event": "{event}", "pipeline": "checkouts"'
            return lambda: line in job.log.read_text()

        wait_for(logged("speed.pipeline_failed"), 180, "checkouts to fail", job)
        produce_direct(after, settings)  # while checkouts is down

        def web_answers() -> bool:
            try:
                views_match_truth(truth, settings)
            except AssertionError:
                return False
            return True

        wait_for(web_answers, 240, "web events' live views to equal their truth", job)
        wait_for(logged("speed.pipeline_restarting"), 60, "checkouts to be tried again", job)
        assert job.poll() is None, "one pipeline's failure must not end the job"

        done = speed_cli(settings, "replay", "--pipeline", "checkouts", "--from", "earliest")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "of checkouts recorded: version 1" in done.stdout
        wait_for(
            lambda: speed_version(settings, "orders_by_currency") == 1,
            300,
            "checkouts' replay to repair it on version 1",
            job,
        )
    finally:
        job.send_signal(signal.SIGTERM)
        code = job.wait(120)
    assert code == 0, speed_job.log_tail(job)

    _assert_orders_match(read_view, settings, shop.build_truth(orders))  # the new version
    assert speed_version(settings, "site_activity") == 0
    views_match_truth(truth, settings)
    assert read_runs(cassandra_session, web_streams) == web_runs, "web events' runs untouched"

    reset = speed_cli(settings, "reset", "--pipeline", "checkouts", "--from", "earliest")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert "speed layer reset of checkouts" in reset.stdout
    assert read_runs(cassandra_session, web_streams) == web_runs, "web events' runs untouched"
    checkout_runs = read_runs(cassandra_session, CHECKOUTS.stream_settings(settings))
    assert checkout_runs[0].requested == "earliest" and checkout_runs[0].generation > 1
