"""merge_partials and estimates: counts add, maxima max, sketches union; merges compose."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.support.web import WEB_VIEWS
from views import estimates, merge_partials, view

pytestmark = pytest.mark.slow

SPLIT = "2024-01-01 00:02:30"
"""Mid-minute: the 00:02 window gets rows from both halves (batch side and speed side)."""


@pytest.fixture(scope="module")
def events(runner, simulation):
    return runner.events(simulation.source).cache()


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda spec: spec.name)
def test_partials_of_two_halves_merge_into_the_whole(spec, events, runner):
    """Serving's case: rows of one window from two layers merge into the window's answer."""
    before = spec.build(events.where(F.col("event_time") < F.lit(SPLIT).cast("timestamp")))
    after = spec.build(events.where(F.col("event_time") >= F.lit(SPLIT).cast("timestamp")))
    merged = merge_partials(before.unionByName(after), spec, period="minute")
    assert runner.table(merged, spec) == runner.table(spec.build(events), spec)


def test_merges_compose(events):
    spec = view("page_activity")
    minutes = spec.build(events)
    hours = merge_partials(minutes, spec, period="hour")
    assert [r["window_start"].hour for r in hours.select("window_start").distinct().collect()]
    again = estimates(merge_partials(hours, spec), spec).orderBy("path").collect()
    direct = estimates(merge_partials(minutes, spec), spec).orderBy("path").collect()
    assert again == direct
    assert merge_partials(minutes, spec).columns == list(spec.columns[1:])
    assert hours.columns == list(spec.columns)
    assert dict(hours.dtypes) == dict(minutes.dtypes)


def test_merge_across_keys_and_days(events, simulation):
    spec = view("site_activity")
    days = merge_partials(spec.build(events), spec, period="day", keys=())
    rows = {r["window_start"].isoformat(): r["events"] for r in days.collect()}
    truth: dict[str, int] = {}
    for minute, count in simulation.truth.events_per_minute.items():
        day = minute[:10] + "T00:00:00"
        truth[day] = truth.get(day, 0) + count
    assert rows == truth  # the late events of the run fall on the day before
    assert days.columns == ["window_start", "events", "page_views", "sessions_started", "visitors"]


def test_bad_arguments_say_what_was_expected(events):
    spec = view("clicks")
    rows = spec.build(events)
    with pytest.raises(ValueError, match=r"lack columns \['clicks'\]"):
        merge_partials(rows.drop("clicks"), spec)
    with pytest.raises(ValueError, match="period must be None or one of minute, hour"):
        merge_partials(rows, spec, period="fortnight")
    with pytest.raises(ValueError, match=r"keys of view 'clicks' \['target'\]"):
        merge_partials(rows, spec, keys=("path",))
    with pytest.raises(ValueError, match="keys must be a sequence"):
        merge_partials(rows, spec, keys="target")
    with pytest.raises(ValueError, match=r"quantiles must lie in \[0, 1\]"):
        estimates(rows, spec, quantiles=(95,))
