"""Across layers: for closed windows the batch views equal the speed layer's rows.

The speed layer streams a topic into Cassandra; the batch pipeline reprocesses
the same log into Delta and publishes its views to Cassandra. Every row of
every view must agree: counts exactly, sums and maxima to rounding, load-time
quantile sketches hold the same number of values, and unique-visitor
estimates within the HLL sketch's error bound. The traffic has duplicates,
out-of-order events and skewed clocks, but no event later than the speed
layer's watermark: those are the batch layer's to repair, and tested there.
"""

from __future__ import annotations

import math

import pytest

from core.settings import Settings
from ingest.simulator import SimulatorConfig, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS, WEB_VIEWS
from views.common import HLL_LG_K
from views.sketches import hll_union, kll_n, kll_quantile

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# 3 standard errors of an HLL sketch of lgK 12 (1.04 / sqrt(2^12) ~ 1.6% each).
HLL_BOUND = 3 * 1.04 / math.sqrt(2**HLL_LG_K)


def _speed_rows(session, settings: Settings, spec) -> dict:
    rows = session.execute(f"SELECT * FROM {settings.cassandra.keyspace}.speed_{spec.name}")
    return {(r.window_start, *(getattr(r, k) for k in spec.keys)): r for r in rows}


def _batch_rows(session, settings: Settings, spec) -> dict:
    """The rows serving reads: each day's current published version."""
    keyspace = settings.cassandra.keyspace
    current = {
        r.day: r.version
        for r in session.execute(
            f"SELECT day, version FROM {keyspace}.batch_days WHERE view_name = %s", (spec.name,)
        )
    }
    rows = session.execute(f"SELECT * FROM {keyspace}.batch_{spec.name}")
    return {
        (r.window_start, *(getattr(r, k) for k in spec.keys)): r
        for r in rows
        if current.get(r.day) == r.version
    }


def _disagreements(spec, speed: dict, batch: dict) -> list[str]:
    """Every measure of every row where the layers differ beyond the measure's tolerance."""
    wrong = []
    for key, s in speed.items():
        b = batch[key]
        for measure in spec.measures:
            mine, theirs = getattr(s, measure.name), getattr(b, measure.name)
            if measure.kind == "count":
                ok = (mine or 0) == (theirs or 0)
            elif measure.kind in ("sum", "max"):
                ok = (mine or 0.0) == pytest.approx(theirs or 0.0, rel=1e-9, abs=1e-9)
            elif measure.kind == "hll":
                mine, theirs = hll_union([mine]), hll_union([theirs])
                ok = abs(mine - theirs) <= max(1.0, HLL_BOUND * theirs)
            else:  # kll: the same values; quantiles agree while the sketch is exact
                mine, theirs = (
                    (kll_n([mine]), kll_quantile([mine], 0.5)),
                    (
                        kll_n([theirs]),
                        kll_quantile([theirs], 0.5),
                    ),
                )
                ok = mine[0] == theirs[0] and (mine[0] > 200 or mine[1] == theirs[1])
            if not ok:
                wrong.append(f"{spec.name} {key} {measure.name}: speed {mine} != batch {theirs}")
    return wrong


def test_batch_views_equal_the_speed_views_for_closed_windows(
    spark, pipeline_settings, run_pipeline, cassandra_session
):
    from speed_layer.job import start_queries

    settings = pipeline_settings  # its keyspace holds the speed tables too
    events = generate(
        SimulatorConfig(
            seed=17,
            events=2500,
            duplicate_rate=0.05,
            out_of_order_rate=0.3,
            skewed_client_rate=0.2,
            invalid_rate=0.03,
        )
    )
    produce_direct(events, settings)

    for query in start_queries(spark, settings, WEB_EVENTS, available_now=True):
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()
    run_pipeline(settings, "layers-1")

    compared = 0
    for spec in WEB_VIEWS:
        speed = _speed_rows(cassandra_session, settings, spec)
        batch = _batch_rows(cassandra_session, settings, spec)
        assert speed, f"the speed layer wrote no {spec.name} rows"
        assert speed.keys() == batch.keys(), spec.name
        assert _disagreements(spec, speed, batch) == []
        compared += len(speed)
    assert compared > 100
