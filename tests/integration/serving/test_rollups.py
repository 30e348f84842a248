"""Answers read from the rollups equal the minute-level answers, on known rows in the real
Cassandra, over HTTP.

Three pages have a row every minute from 2024-03-01 20:00 to 2024-03-04 04:00 in both
layers (speed rows say ten times more page views, so a window read from the wrong layer
shows). The boundary lies inside an hour (2024-03-03 17:23), and the questions' ranges
have ragged edges, whole hours and a whole day. The batch rows are published twice: first
with their hour and day rollups (what the batch layer publishes), then the same rows as a
new version without them (as an older release published: serving reads its minutes). Both
publishes must give the same answers: counts exactly, distinct counts as equal estimates,
quantile sketches the same number of values and quantiles within the sketch's error; and
the counts equal the sums over the rows themselves.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import datasketches as ds
import pytest

from views.common import HLL_LG_K

pytestmark = pytest.mark.integration

T0 = datetime(2024, 3, 1, 20, 0, tzinfo=UTC)
END = datetime(2024, 3, 4, 4, 0, tzinfo=UTC)
BOUNDARY = datetime(2024, 3, 3, 17, 23, tzinfo=UTC)
MINUTES = [T0 + timedelta(minutes=i) for i in range(int((END - T0).total_seconds() // 60))]
PAGES = ("/a", "/b", "/c")
SPEED_TTL_S = 10 * 365 * 24 * 3600
"""The speed rows of 2024 are kept (and served as speed) for this module's questions."""
SERVING = {"max_top_partitions": 5000}
"""Read by the minute, the first range is about 3,100 partitions (refused by default)."""

RANGES = [
    ("2024-03-01T20:17:30Z", "2024-03-03T23:41:00Z"),  # ragged, a whole day, the boundary
    ("2024-03-01T23:59:00Z", "2024-03-02T00:01:00Z"),  # two minutes across midnight
    ("2024-03-02T00:00:00Z", "2024-03-03T00:00:00Z"),  # exactly one day
    ("2024-03-02T05:00:00Z", "2024-03-03T19:00:00Z"),  # whole hours, the boundary inside
    ("2024-03-03T17:00:00Z", "2024-03-03T18:00:00Z"),  # the hour holding the boundary
]


def _row(start: datetime, path: str, rng: random.Random, scale: int) -> dict:
    views = rng.randrange(1, 6) * scale
    visitors = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    for _ in range(views):
        visitors.update(f"{path}-u{rng.randrange(400)}")
    loads = [rng.lognormvariate(5, 0.6) for _ in range(views)]
    sketch = ds.kll_doubles_sketch(200)
    for load in loads:
        sketch.update(load)
    return {
        "window_start": start,
        "path": path,
        "page_views": views,
        "visitors": visitors.serialize_compact(),
        "load_count": len(loads),
        "load_sum": sum(loads),
        "load_max": max(loads),
        "load_sketch": sketch.serialize(),
    }


BATCH = [_row(m, p, random.Random(f"b{m}{p}"), 1) for m in MINUTES for p in PAGES]
SPEED = [_row(m, p, random.Random(f"s{m}{p}"), 10) for m in MINUTES for p in PAGES]


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _truth(start: str, end: str) -> dict[str, int]:
    """Page views per page over a range, by the boundary rule, from the rows themselves."""
    lo, hi = _parse(start), _parse(end)
    out = dict.fromkeys(PAGES, 0)
    for rows, keep in ((BATCH, lambda t: t < BOUNDARY), (SPEED, lambda t: t >= BOUNDARY)):
        for row in rows:
            if lo <= row["window_start"] < hi and keep(row["window_start"]):
                out[row["path"]] += row["page_views"]
    return out


def _answers(api) -> dict:
    """Every question over every range, without what differs between two reads (ages,
    freshness, cache)."""
    out = {}
    for start, end in RANGES:
        window = {"start": start, "end": end}
        for measure in ("page_views", "visitors", "load_sketch"):
            answer = api.get(
                "/v1/top",
                params={"view": "page_activity", "measure": measure, "n": 3} | window,
            )
            assert answer.status_code == 200, answer.text
            out[("top", measure, start)] = (answer.json()["items"], answer.json()["final"])
        for path in PAGES:
            answer = api.get(
                "/v1/reach", params={"view": "page_activity", "key": path} | window
            ).json()
            out[("reach", path, start)] = (answer["visitors"], answer["source"])
        for granularity in ("hour", "day"):
            answer = api.get(
                "/v1/timeseries",
                params={"view": "page_activity", "key": "/a", "granularity": granularity} | window,
            )
            assert answer.status_code == 200, answer.text
            out[("timeseries", granularity, start)] = answer.json()["series"][0]["buckets"]
    return out


@pytest.fixture(scope="module")
def both(publish, write_speed, api) -> tuple[dict, dict]:
    """The answers with rollups, then from minutes only."""
    write_speed("page_activity", SPEED)
    publish("page_activity", BATCH, BOUNDARY)
    with_rollups = _answers(api)
    publish("page_activity", BATCH, BOUNDARY, rollups=False)
    return with_rollups, _answers(api)


HLL_RSE = 1.04 / 2 ** (HLL_LG_K / 2)
"""One relative standard error of the views' HLL sketches (1.6% at lgK 12)."""


def _estimate_close(a: float, b: float) -> bool:
    """Distinct counts from the rollups and from the minutes agree within one standard error.

    The sketches hold the same registers either way, but a union's estimator depends
    on the order it merged in (lists of coupons, then dense registers), as in Spark's
    ``hll_union_agg``: the estimates differ by a few tenths of a percent.
    """
    return abs(a - b) <= HLL_RSE * max(a, b, 1)


def _close(a, b) -> bool:
    return (a is None and b is None) or abs(a - b) <= 0.1 * max(abs(a), abs(b))


def test_counts_equal_the_rows_themselves(both) -> None:
    with_rollups, _ = both
    for start, end in RANGES:
        items, _final = with_rollups[("top", "page_views", start)]
        truth = _truth(start, end)
        expected = sorted(((-v, p) for p, v in truth.items() if v), key=lambda t: t)
        assert [(i["key"]["path"], i["value"]) for i in items] == [(p, -v) for v, p in expected]


def _by_page(items: list[dict]) -> dict[str, dict]:
    return {item["key"]["path"]: item for item in items}


def test_rollup_answers_equal_minute_answers(both) -> None:
    with_rollups, minutes_only = both
    assert with_rollups.keys() == minutes_only.keys()
    for question, rolled in with_rollups.items():
        plain = minutes_only[question]
        kind, what = question[0], question[1]
        if kind == "top" and what == "page_views":
            assert rolled == plain, question  # counts exact, same order
        elif kind == "top":  # every page is ranked (n = 3), each by a close value
            assert rolled[1] == plain[1], question
            ours, theirs = _by_page(rolled[0]), _by_page(plain[0])
            assert ours.keys() == theirs.keys() == set(PAGES), question
            for page, item in ours.items():
                other = theirs[page]
                if what == "visitors":
                    assert _estimate_close(item["value"], other["value"]), question
                else:  # p95 of sketches merged in another order, on the same values
                    assert item["samples"] == other["samples"], question
                    assert _close(item["value"], other["value"]), question
        elif kind == "reach":
            assert rolled[1] == plain[1] and _estimate_close(rolled[0], plain[0]), question
        else:  # timeseries buckets
            assert [b["start"] for b in rolled] == [b["start"] for b in plain], question
            for a, b in zip(rolled, plain, strict=True):
                for name, value in a.items():
                    if name == "visitors":
                        assert _estimate_close(value, b[name]), (question, a["start"])
                    elif name.startswith("load_sketch_p"):
                        assert _close(value, b[name]), (question, a["start"], name)
                    elif name == "load_sum":  # floating sums added in another order
                        assert value == pytest.approx(b[name], rel=1e-9), (question, a["start"])
                    else:
                        assert value == b[name], (question, a["start"], name)


def test_the_planner_reads_day_and_hour_rollups_not_every_minute(
    both, publish, serving_settings, cql
) -> None:
    """The planner's reads over the real store: by the minute while the days' version has
    no rollups (the minute-only publish above), then day and hour partitions once a
    publish with rollups replaces it."""
    import asyncio

    from serving.freshness import FreshnessRules
    from serving.query import CacheRules, Limits, Queries
    from serving.store import ServingStore
    from serving.timerange import parse_instant

    read: list[str] = []

    class Counting(ServingStore):
        async def window_rows(self, view, layer, measure, start, version, grain="minute"):
            read.append(f"{layer}:{grain}")
            return await super().window_rows(view, layer, measure, start, version, grain)

    async def ask() -> dict:
        store = Counting(cql, serving_settings.cassandra.keyspace, pointer_cache_s=0)
        limits = Limits(max_top_partitions=SERVING["max_top_partitions"])
        rules = FreshnessRules.from_settings(serving_settings)  # the speed rows of 2024 stay
        queries = Queries(store, limits, rules=rules, cache=CacheRules(entries=0))
        lo, hi = (parse_instant(t, now_ms=0) for t in RANGES[0])
        return await queries.top("page_activity", "page_views", lo, hi, n=3)

    minutes_only = asyncio.run(ask())
    batch_by_minute = sum(r.startswith("batch") for r in read)
    assert set(read) == {"batch:minute", "speed:minute"}
    read.clear()
    publish("page_activity", BATCH, BOUNDARY)
    rolled = asyncio.run(ask())
    assert rolled["items"] == minutes_only["items"]
    assert read.count("batch:day") == 1 and read.count("batch:hour") == 3 + 17
    batch = sum(r.startswith("batch") for r in read)
    assert batch == 1 + 20 + 42 + 23 and batch_by_minute == 42 + 3 * 60 + 1440 + 17 * 60 + 23
