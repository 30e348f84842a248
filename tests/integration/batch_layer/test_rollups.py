"""Rollups: the hour and day rows publish writes are the merge of the minute rows they cover.

The session's published lake (:mod:`tests.support.lake`): one real pipeline run (Kafka,
Spark, Delta, Cassandra) over two days of simulated traffic, so that two days and many hours
are published. Then, for
every view of the pipeline and every measure, the hour and day rows read back
from Cassandra at the version ``batch_days`` names, from the by-key and the
by-window tables, must equal the published minute rows under them merged in
plain Python by each measure's kind (:func:`views.kinds.kind`): counts,
maxima and minima exactly, sums to 1e-9 relative, HLL sketches as sketches
(each side's union adds nothing to the other), KLL sketches by their number
of values, smallest and largest value (and every quantile while both hold
all their values). No rollup row lacks minute rows under it, and no minute
rows lack their rollup row.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import pytest

from core.settings import Settings
from layout import GRAINS, ViewTables
from tests.support.lake import GROUP, PublishedLake
from tests.support.web import WEB_EVENTS
from views.common import HLL_LG_K
from views.kinds import kind
from views.spec import ViewSpec

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group(GROUP),
]

QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


@pytest.fixture(scope="module")
def published(published_lake: PublishedLake) -> Settings:
    """The session's published lake: two days of traffic, one run of the whole pipeline."""
    return published_lake.settings


def _served(session, keyspace: str, view: str) -> dict:
    """{day: version} of ``view``, as ``batch_days`` names them."""
    rows = session.execute(
        f"SELECT day, version, rollups FROM {keyspace}.batch_days WHERE view_name = %s", (view,)
    ).all()
    assert all(r.rollups for r in rows), f"{view}: a day published without its rollups"
    return {r.day.date(): r.version for r in rows}


def _utc(t: datetime) -> datetime:
    return t.replace(tzinfo=UTC)


def _read(session, tables: ViewTables, served: dict) -> tuple[dict, dict]:
    """Both tables of one grain at the served versions: {(window_start, *keys): {measure:
    value}} from the by-key table, then from the by-window table. Every row of the tables
    must be under a served version (one publish ran)."""
    spec = tables.spec
    measures = [m.name for m in spec.measures]
    out = []
    for table in (tables.by_key, tables.by_minute):
        got = {}
        for r in session.execute(f"SELECT * FROM {table}"):
            start = _utc(r.window_start)
            assert served.get(start.date()) == r.version, f"{table}: a row of no served version"
            if table == tables.by_key:
                assert r.day.date() == start.date(), f"{table}: row in another day's partition"
            row_key = (start, *(getattr(r, k) for k in spec.keys))
            assert row_key not in got, f"{table}: {row_key} twice"
            got[row_key] = {m: getattr(r, m) for m in measures}
        out.append(got)
    return out[0], out[1]


def _truncated(start: datetime, grain: str) -> datetime:
    if grain == "hour":
        return start.replace(minute=0, second=0, microsecond=0)
    return start.replace(hour=0, minute=0, second=0, microsecond=0)


def _covered(minutes: dict, grain: str) -> dict:
    """{(window_start of the grain, *keys): {measure: [minute values]}}."""
    out: dict = defaultdict(lambda: defaultdict(list))
    for (start, *keys), values in minutes.items():
        for measure, value in values.items():
            out[(_truncated(start, grain), *keys)][measure].append(value)
    return out


def _hll_estimate(*sketches: bytes | None) -> float:
    """Estimate of the union of ``sketches``' registers: each is unioned twice, so the
    union estimates from the registers alone, never from one sketch's own (HIP) estimate,
    as :func:`views.sketches.hll_register_estimate` does for one sketch."""
    import datasketches as ds

    union = ds.hll_union(HLL_LG_K)
    for sketch in sketches:
        parsed = ds.hll_sketch.deserialize(bytes(sketch))
        union.update(parsed)
        union.update(parsed)
    return union.get_estimate()


def _differs(measure_kind: str, stored: Any, parts: list) -> str | None:
    """How the stored rollup value differs from the merge of its minute values (None: equal)."""
    merged = kind(measure_kind).merge(parts)
    if measure_kind in ("count", "max", "min"):
        return None if stored == merged else f"{stored!r} != merged {merged!r}"
    if measure_kind == "sum":
        if stored is None or merged is None:
            return None if stored is merged else f"{stored!r} != merged {merged!r}"
        return None if stored == pytest.approx(merged, rel=1e-9) else f"{stored} != {merged}"
    if measure_kind == "hll":
        if stored is None or merged is None:
            return None if stored is merged else f"{stored!r} != merged {merged!r}"
        mine = kind("hll").stored(merged)
        # Equal as sketches: neither side's union adds anything to the other.
        estimates = (_hll_estimate(stored), _hll_estimate(mine), _hll_estimate(stored, mine))
        same = estimates[0] == estimates[1] == estimates[2]
        return None if same else f"estimates stored, merged, both: {estimates}"
    if measure_kind == "kll":
        import datasketches as ds

        if stored is None or merged is None:
            return None if stored is merged else f"{stored!r} != merged {merged!r}"
        sketch = ds.kll_doubles_sketch.deserialize(bytes(stored))
        if sketch.n != merged.n or sketch.n == 0:
            return f"n {sketch.n} != merged {merged.n}"
        ends = (sketch.get_min_value(), sketch.get_max_value())
        if ends != (merged.get_min_value(), merged.get_max_value()):
            return f"min, max {ends} != merged {merged.get_min_value(), merged.get_max_value()}"
        if not sketch.is_estimation_mode() and not merged.is_estimation_mode():
            got = [sketch.get_quantile(q, True) for q in QUANTILES]
            want = [merged.get_quantile(q, True) for q in QUANTILES]
            return None if got == want else f"quantiles {got} != merged {want}"
        return None
    return f"no comparison for measure kind {measure_kind!r}: add one here"


def _rollups_of(session, keyspace: str, spec: ViewSpec) -> dict:
    """{grain: (by-key rows, by-window rows)} of ``spec`` at its served versions."""
    served = _served(session, keyspace, spec.name)
    return {
        grain: _read(session, ViewTables(spec, keyspace, "batch", grain=grain), served)
        for grain in GRAINS
    }


@pytest.mark.parametrize("view", WEB_EVENTS.views)
def test_rollup_rows_are_the_merge_of_the_minute_rows_they_cover(
    published, cassandra_session, view
) -> None:
    from views import view as view_spec

    spec = view_spec(view)
    grains = _rollups_of(cassandra_session, published.cassandra.keyspace, spec)
    minutes, minutes_by_window = grains["minute"]
    assert minutes, f"{view}: no minute rows published"
    assert minutes_by_window == minutes, f"{view}: the two minute tables differ"

    for grain in ("hour", "day"):
        by_key, by_window = grains[grain]
        expected = _covered(minutes, grain)
        # No rollup row without minute rows under it, none missing: the same keys.
        assert set(by_key) == set(expected), (
            f"{view} {grain}: rows without minute rows "
            f"{sorted(set(by_key) - set(expected))[:5]}, missing "
            f"{sorted(set(expected) - set(by_key))[:5]}"
        )
        assert by_window == by_key, f"{view} {grain}: the by-key and by-window tables differ"
        wrong = [
            f"{view} {grain} {row_key} {m.name}: {why}"
            for row_key, stored in by_key.items()
            for m in spec.measures
            if (why := _differs(m.kind, stored[m.name], expected[row_key][m.name])) is not None
        ]
        assert wrong == [], "\n".join(wrong[:20])

    days = {start.date() for start, *_ in grains["day"][0]}
    hours = {start for start, *_ in grains["hour"][0]}
    assert len(days) >= 2 and len(hours) > len(days), (view, days, hours)
