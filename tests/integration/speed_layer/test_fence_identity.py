"""The fence names a run by an identity that cannot repeat: a checkpoint lost and created again
at the same path is a new run, whose batch ids start at 0 again."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from speed_layer.job import start_queries
from speed_layer.start import StartPosition
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _drain(spark, settings) -> list[str]:
    """Run the speed layer's query until the log is read (in this process); its run ids."""
    (query,) = start_queries(spark, settings, WEB_EVENTS, available_now=True)
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return [str(query.id)]


def test_a_checkpoint_lost_and_created_again_at_the_same_path_counts_every_event_once(
    spark, speed_settings, views_match_truth, read_view
):
    settings = speed_settings
    start = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=6)
    first = generate(SimulatorConfig(seed=71, events=300, rate=2.0, start=start))
    produce_direct(first, settings)
    lost_run = _drain(spark, settings)  # one micro-batch: every row fenced at batch 0
    views_match_truth(build_truth(first), settings)

    checkpoint = Path(f"{StartPosition().checkpoint_dir(settings)}/views")
    assert (checkpoint / "offsets").is_dir()
    shutil.rmtree(checkpoint)  # lost; the next start creates it again, batch ids from 0

    second = generate(SimulatorConfig(seed=72, events=300, rate=2.0, start=start))
    produce_direct(second, settings)
    # The new run reads the whole log again in many micro-batches, into the same windows.
    small = settings.model_copy(
        update={"speed": settings.speed.model_copy(update={"max_offsets_per_trigger": 200})}
    )
    new_run = _drain(spark, small)
    assert new_run != lost_run

    views_match_truth(build_truth(first + second), settings)  # nothing dropped, nothing twice
    rows = read_view(settings, "site_activity").values()
    assert {str(row.run_id) for row in rows} == set(new_run)
