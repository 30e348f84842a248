"""The views over a simulated run, in both modes, against the simulator's ground truth.

Counts must be exact; distinct visitors (HLL sketches) within the sketch's
error bound; sessions against the simulator's own session landings.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import pytest

from ingest.simulator import generate, identity_of, minute_key
from ingest.simulator import sessions as simulator_sessions
from views import view
from views.common import HLL_LG_K

pytestmark = pytest.mark.slow

HLL_RSE = 1.04 / math.sqrt(2**HLL_LG_K)
"""Relative standard error of an HLL sketch with 2**lgK registers (1.6% at lgK=12)."""


def within_hll_bound(estimate: float, exact: int) -> bool:
    """Three standard errors (99.7%), and never less than one visitor."""
    return abs(estimate - exact) <= max(1.0, 3 * HLL_RSE * exact)


def _column(table, measure):
    """``{minute: {key: value}}`` of one measure, dropping zero counts (absent in the truth)."""
    out: defaultdict[str, dict[str, object]] = defaultdict(dict)
    for (minute, key), row in table.items():
        out[minute][key] = row[measure]
    return dict(out)


def landing_ids(simulation) -> set[str]:
    """messageIds of the page views that open a session, as the simulator itself decides."""
    recorded: list[str] = []
    landing = simulator_sessions._landing

    def spy(*args, **kwargs):
        body = landing(*args, **kwargs)
        recorded.append(body["messageId"])
        return body

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simulator_sessions, "_landing", spy)
        assert generate(simulation.config) == simulation.sent  # watching changed nothing
    return set(recorded)


def test_page_views_per_page_per_minute(mode, simulated, simulation):
    table = simulated(mode, view("page_activity"))
    assert _column(table, "page_views") == simulation.truth.page_views


def test_page_visitors_within_the_hll_bound(mode, simulated, simulation):
    visitors = _column(simulated(mode, view("page_activity")), "visitors")
    truth = simulation.truth.page_visitors
    assert visitors.keys() == truth.keys()
    for minute, by_page in truth.items():
        assert visitors[minute].keys() == by_page.keys()
        for path, exact in by_page.items():
            assert within_hll_bound(visitors[minute][path], exact), (minute, path)


def test_clicks_and_searches(mode, simulated, simulation):
    assert _column(simulated(mode, view("clicks")), "clicks") == simulation.truth.clicks
    assert _column(simulated(mode, view("search_terms")), "searches") == simulation.truth.searches


def test_site_events_page_views_and_visitors(mode, simulated, simulation):
    site = {minute: row for (minute, _), row in simulated(mode, view("site_activity")).items()}
    truth = simulation.truth
    assert {m: row["events"] for m, row in site.items()} == truth.events_per_minute
    assert {m: row["page_views"] for m, row in site.items()} == truth.page_views_per_minute
    for minute, exact in truth.visitors_per_minute.items():
        assert within_hll_bound(site[minute]["visitors"], exact), minute


def test_sessions_started_are_the_simulators_session_landings(mode, simulated, simulation):
    landings = landing_ids(simulation)
    expected = Counter(
        minute_key(event.time) for event in simulation.events if event.message_id in landings
    )
    site = simulated(mode, view("site_activity"))
    started = {minute: row["sessions_started"] for (minute, _), row in site.items()}
    assert {m: n for m, n in started.items() if n} == dict(expected)
    assert sum(expected.values()) > 20, "the run should open many sessions"


def test_load_times_over_the_run(simulation, runner):
    """Whole-run load statistics per page: merged minute rows against the truth, exactly."""
    from views import estimates, merge_partials

    spec = view("page_activity")
    minutes = spec.build(runner.events(simulation.source))
    merged = estimates(merge_partials(minutes, spec), spec, quantiles=(0.5, 0.95))
    rows = {row["path"]: row for row in merged.collect()}
    loads: defaultdict[str, list[float]] = defaultdict(list)
    for event in simulation.events:
        properties = event.payload.get("properties") or {}
        if event.payload["type"] == "page" and "load_time_ms" in properties:
            loads[properties["path"]].append(float(properties["load_time_ms"]))
    assert {p for p, row in rows.items() if row["load_count"]} == set(simulation.truth.load_time)
    for path, stats in simulation.truth.load_time.items():
        row = rows[path]
        assert (row["load_count"], row["load_max"]) == (stats.count, stats.max_ms), path
        assert row["load_sum"] == pytest.approx(stats.sum_ms), path
        values = sorted(loads[path])
        assert len(values) <= 200, "below k=200 a KLL sketch keeps every value: exact quantiles"
        for q, column in ((0.5, "load_sketch_p50"), (0.95, "load_sketch_p95")):
            inclusive = values[max(math.ceil(q * len(values)) - 1, 0)]
            assert row[column] == inclusive, (path, q)


def test_visitors_over_the_run(simulation, runner):
    """Minute sketches union to the run's distinct visitors (site) and page viewers."""
    from views import estimates, merge_partials

    site, pages = view("site_activity"), view("page_activity")
    events = runner.events(simulation.source)
    total = estimates(merge_partials(site.build(events), site), site).first()
    assert within_hll_bound(total["visitors"], simulation.truth.visitors_total)
    viewers = {
        identity_of(event.payload) for event in simulation.events if event.payload["type"] == "page"
    }
    across = estimates(merge_partials(pages.build(events), pages, keys=()), pages).first()
    assert within_hll_bound(across["visitors"], len(viewers))
    assert across["page_views"] == sum(simulation.truth.page_views_per_minute.values())
