"""The hot path (``serving/hot.py``) answers exactly as the FastAPI routes do, or lets them answer.

Two apps share one query core on a store of known rows, with a clock that
stands still: one with the hot path (``serving.hot_path``, the default), one
without. Each request is made to both and the responses (status, headers,
body) compared byte for byte; the scope tells which path answered (the
router sets ``scope["route"]``; the hot path never reaches it).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from fastapi.routing import APIRoute

from core.settings import ServingSettings, Settings
from serving.app import create_app
from serving.hot import _REQUIRED, ROUTES
from serving.query import Queries
from tests.support.serving_app import NOW_MS, TOKEN, Apps, Store, queries_of

SITE_TS = (
    "/v1/timeseries?view=site_activity&start=now-60m&end=now&granularity=minute"
    "&measure=events&measure=page_views&measure=visitors"
)
TOP = "/v1/top?view=page_activity&measure=page_views&n=10&start=now-60m&end=now"
HITS = [
    SITE_TS,
    "/v1/timeseries?view=page_activity&key=/a&key=/b&start=now-3h&granularity=hour",
    "/v1/timeseries?view=page_activity&key=/a&quantile=0.5&quantile=0.99",
    "/v1/timeseries?view=site_activity",
    "/v1/reach?view=site_activity&start=now-60m&end=now",
    "/v1/reach?view=page_activity&key=/a&start=now-1d",
    "/v1/reach",
    TOP,
    "/v1/top?view=page_activity&measure=load_sketch&n=5&start=now-1m&end=now",
    "/v1/top?view=page_activity&measure=load_sketch&quantile=0.5&min_samples=2",
    "/v1/top?view=search_terms&measure=searches",
]


def _settings(hot_path: bool) -> Settings:
    base = Settings()
    serving = base.serving.model_dump() | {"api_tokens": {"tester": TOKEN}, "hot_path": hot_path}
    return base.model_copy(update={"serving": ServingSettings(**serving)})


@contextmanager
def _started(queries_hot: Queries, queries_framework: Queries) -> Iterator[Apps]:
    apps = Apps(
        create_app(_settings(True), queries_hot), create_app(_settings(False), queries_framework)
    )
    contexts = [app.router.lifespan_context(app) for app in (apps.hot, apps.framework)]
    for context in contexts:
        apps.loop.run_until_complete(context.__aenter__())
    try:
        yield apps
    finally:
        for context in contexts:
            apps.loop.run_until_complete(context.__aexit__(None, None, None))
        apps.loop.close()


@pytest.fixture
def apps() -> Iterator[Apps]:
    """Both apps on one query core: an answer one keeps, the other finds."""
    queries = queries_of()
    with _started(queries, queries) as apps:
        yield apps


@pytest.mark.parametrize("path", HITS)
def test_a_kept_answer_is_the_same_bytes_on_both_paths(apps, path) -> None:
    first = apps.call(apps.hot, path)
    assert first[0] == 200 and first[3], "a question asked first is computed by the route"
    assert b'"cache":{"hit":false' in first[2]
    hot, framework = apps.both(path)
    assert not hot[3] and framework[3], "the hot path answered, the framework the other"
    assert hot[:3] == framework[:3]
    assert b'"cache":{"hit":true' in hot[2]
    assert dict(hot[1])[b"content-type"] == b"application/json"


def test_an_answer_not_kept_goes_to_the_framework(apps) -> None:
    path = "/v1/top?view=page_activity&measure=visitors&n=3"  # hll: ranked, nothing kept yet
    assert apps.call(apps.hot, path)[3]
    assert not apps.call(apps.hot, path)[3]


def test_a_stale_answer_is_answered_at_once_while_the_new_one_is_computed() -> None:
    queries = queries_of()
    with _started(queries, queries) as apps:
        apps.call(apps.framework, TOP)  # kept, over the speed progress of now
        store = queries.store
        store._pointers = replace(  # a speed micro-batch: the same question is a new key
            store._pointers,
            views={n: replace(p, speed_generation=2) for n, p in store._pointers.views.items()},
        )
        stale = apps.call(apps.hot, TOP)
        assert not stale[3] and b'"stale":true' in stale[2], "the hot path answered it"
        computed = queries.results.stats.computed
        for _ in range(3000):  # the successor, started, finishes (its merge in a thread)
            if queries.results.stats.computed > computed:
                break
            apps.loop.run_until_complete(asyncio.sleep(0.01))
        assert queries.results.stats.computed == computed + 1
        hot, framework = apps.both(TOP)
        assert not hot[3] and hot[:3] == framework[:3]
        assert b'"cache":{"hit":true,"shared":false,"stale":false' in hot[2]


@pytest.mark.parametrize("path", [SITE_TS, TOP, "/v1/reach?view=site_activity&start=now-60m"])
def test_a_range_relative_to_now_is_answered_at_once_when_the_minute_turns(path) -> None:
    """``now-60m`` is a new key at each minute's turn: the answer of a moment ago is
    answered (``stale``, with the range it covers) while the new one is computed, instead
    of every viewer waiting for it at once."""
    import orjson

    now, kept = [NOW_MS - 1_000], [1000.0]
    queries = Queries(Store(), clock=lambda: now[0] / 1000)
    queries.results.clock = lambda: kept[0]
    with _started(queries, queries) as apps:
        before = orjson.loads(apps.call(apps.framework, path)[2])
        now[0] += 44_000  # 1 s into the next minute: other windows, the same question
        kept[0] += 2.0
        status, _, body, by_framework = apps.call(apps.hot, path)
        assert status == 200 and not by_framework, "the hot path answered it"
        moved = orjson.loads(body)
        assert moved["cache"]["stale"] and moved["cache"]["age_s"] == 2.0
        assert (moved["start"], moved["end"]) == (before["start"], before["end"])
        clock = ("cache", "pointers_age_s", "freshness", "boundary_age_s")  # read at each ask
        assert {k: v for k, v in moved.items() if k not in clock} == {
            k: v for k, v in before.items() if k not in clock
        }
        computed = queries.results.stats.computed
        for _ in range(3000):  # the successor, started, finishes
            if queries.results.stats.computed > computed:
                break
            apps.loop.run_until_complete(asyncio.sleep(0.01))
        after = orjson.loads(apps.call(apps.hot, path)[2])
        assert not after["cache"]["stale"] and after["end"] > before["end"]


def test_a_fixed_range_never_answers_another_range_s_answer(apps) -> None:
    earlier = "/v1/top?view=page_activity&measure=page_views&n=10&start={}&end={}"
    start, end = "2025-11-24T15:00:00Z", "2025-11-24T16:00:00Z"
    assert apps.call(apps.framework, earlier.format(start, end))[0] == 200
    later = earlier.format("2025-11-24T15:01:00Z", "2025-11-24T16:01:00Z")
    assert apps.call(apps.hot, later)[3], "not kept: the framework computes it"


def test_answers_are_merged_off_the_event_loop(monkeypatch) -> None:
    """A micro-batch makes every question new: its merges must not hold up the requests
    answered meanwhile from the shared answers, so they run in a thread, not the loop's."""
    from serving import query, ranking, series

    on_loop: list[bool] = []

    def recorded(function):
        def run(*args, **kwargs):
            on_loop.append(threading.current_thread() is threading.main_thread())
            return function(*args, **kwargs)

        return run

    monkeypatch.setattr(ranking, "rank_value", recorded(ranking.rank_value))
    monkeypatch.setattr(ranking, "kind", recorded(ranking.kind))
    monkeypatch.setattr(series, "summarise", recorded(series.summarise))
    monkeypatch.setattr(query, "hll_estimate", recorded(query.hll_estimate))
    queries = queries_of()
    with _started(queries, queries) as apps:
        for path in (TOP, HITS[1], HITS[4]):  # a top-N, hourly buckets, a reach
            assert apps.call(apps.framework, path)[0] == 200
    assert len(on_loop) > 3 and not any(on_loop), on_loop


REFUSED = {
    "no token": (TOP, []),
    "unknown token": (TOP, [(b"authorization", b"Bearer nope")]),
    "empty token": (TOP, [(b"authorization", b"Bearer ")]),
    "another scheme": (TOP, [(b"authorization", f"Basic {TOKEN}".encode())]),
    "token twice, the first wrong": (
        TOP,
        [(b"authorization", b"Bearer nope"), (b"authorization", f"Bearer {TOKEN}".encode())],
    ),
}
ODD = [
    TOP + "&n=abc",
    TOP + "&n=0",
    TOP + "&n=101",
    TOP + "&n=010",
    TOP + "&quantile=1.5",
    TOP + "&quantile=nan",
    TOP + "&quantile=.5",
    TOP + "&min_samples=0",
    TOP + "&view=search_terms",  # a scalar given twice
    TOP + "&unknown=1",  # FastAPI ignores it (200): the framework's answer still
    TOP.replace("now-60m", "now-" + "1" * 62 + "m"),  # 65 characters
    TOP.replace("now-60m", "yesterday"),
    TOP.replace("end=now", "end=now-2h"),  # before start
    TOP.replace("page_views", "nope"),
    "/v1/top?view=page_activity&n=10",  # no measure
    SITE_TS + "&granularity=week",
    SITE_TS + "&quantile=2",
    SITE_TS.replace("site_activity", "nope"),
    "/v1/timeseries?view=page_activity",  # no key
    "/v1/reach?view=search_terms",
    "/v1/reach?view=page_activity",
    "/v1/reach?key=",
    "/v1/reach?view=site_activity&start=now-60m&end=now&view=site_activity",
]


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_request_without_a_valid_token_is_refused_as_before(apps, case) -> None:
    path, headers = REFUSED[case]
    apps.call(apps.hot, path)  # kept: only the token stands in the way
    hot, framework = apps.both(path, headers)
    assert hot[3] and framework[3]
    assert hot[:3] == framework[:3]
    assert hot[0] == 401 and (b"www-authenticate", b"Bearer") in hot[1]


@pytest.mark.parametrize("path", ODD)
def test_an_odd_parameter_goes_to_the_framework(apps, path) -> None:
    for kept in (TOP, SITE_TS, "/v1/reach?view=site_activity&start=now-60m&end=now", path):
        apps.call(apps.framework, kept)  # kept, as is any question the odd one asks
    hot, framework = apps.both(path)
    assert hot[3], "answered by the framework"
    assert hot[:3] == framework[:3]


def test_requests_are_counted_as_the_framework_counted_them() -> None:
    paths = [*HITS, *HITS, *ODD[:6], "/v1/nowhere", "/health"]
    refused = [REFUSED[case] for case in REFUSED]
    counted = []
    for hot in (True, False):
        with _started(queries_of(), queries_of()) as apps:
            app = apps.hot if hot else apps.framework
            by_hot_path = [not apps.call(app, p)[3] for p in paths[:-2]]
            by_hot_path += [not apps.call(app, p, h)[3] for p, h in refused]
            assert sum(by_hot_path) >= len(HITS) if hot else not any(by_hot_path)
            apps.call(app, paths[-2])
            apps.call(app, paths[-1])
            text = apps.call(app, "/metrics")[2].decode()
        counted.append(
            sorted(
                line
                for line in text.splitlines()
                if line.startswith(
                    (
                        "wap_serving_requests_total",
                        "wap_serving_request_duration_seconds_count",
                        'wap_serving_cache_lookups{cache="answers"',
                    )
                )
            )
        )
    assert counted[0] == counted[1]
    # 4 x 2 of HITS and n=010 (FastAPI reads 10); five odd ones refused, five tokens.
    assert 'wap_serving_requests_total{route="/v1/top",status="200"} 9.0' in counted[0]
    assert 'wap_serving_requests_total{route="/v1/top",status="400"} 5.0' in counted[0]
    assert 'wap_serving_requests_total{route="/v1/top",status="401"} 5.0' in counted[0]
    assert 'wap_serving_cache_lookups{cache="answers",how="cached"} 13.0' in counted[0]


def _query_params(dependant) -> list:
    """A route's query parameters, its dependencies' included."""
    return [
        *dependant.query_params,
        *(p for sub in dependant.dependencies for p in _query_params(sub)),
    ]


@pytest.mark.parametrize("path", ROUTES)
def test_the_hot_path_reads_the_parameters_the_route_declares(path) -> None:
    app = create_app(_settings(True), queries_of())
    route = next(r for r in app.routes if isinstance(r, APIRoute) and r.path == path)
    declared = {  # the route's own and its dependencies' (the view: the gate's check)
        field.alias: None if field.field_info.is_required() else field.field_info.default
        for field in _query_params(route.dependant)
    }
    hot = {
        name: None if param.default is _REQUIRED else param.default
        for name, param in ROUTES[path].params.items()
    }
    assert set(hot) == set(declared)
    for name, default in declared.items():
        assert hot[name] == (tuple(default) if isinstance(default, list) else default), name
