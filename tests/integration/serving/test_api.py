"""The HTTP API's edges: tokens, bad input, injection attempts, documentation."""

from __future__ import annotations

import http.client
import time

import httpx
import pytest

pytestmark = pytest.mark.integration

RANGE = {"start": "now-1h", "end": "now"}


def test_no_token_or_a_wrong_one_is_401(serving_url: str) -> None:
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic eDp5"}):
        answer = httpx.get(
            f"{serving_url}/v1/timeseries",
            params={"view": "page_activity", "key": "/"},
            headers=headers,
        )
        assert answer.status_code == 401, headers
        assert answer.headers["WWW-Authenticate"] == "Bearer"
        assert answer.json()["error"] == "unauthorized"
    assert httpx.get(f"{serving_url}/health").status_code == 200  # probes need no token


def test_the_api_is_read_only(api: httpx.Client) -> None:
    assert api.post("/v1/timeseries", json={}).status_code == 405
    assert api.delete("/v1/top").status_code == 405


@pytest.mark.parametrize(
    ("path", "params", "code", "words"),
    [
        ("/v1/timeseries", {"view": "nope", "key": "/"}, "unknown_view", "page_activity"),
        ("/v1/timeseries", {"view": "page_activity"}, "missing_key", "path"),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "start": "yesterday"},
            "invalid_range",
            "ISO 8601",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "start": "now", "end": "now-1h"},
            "invalid_range",
            "before start",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "start": "now-401d", "granularity": "day"},
            "range_too_large",
            "400",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "start": "now-10d"},
            "too_many_buckets",
            "coarser",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "granularity": "week"},
            "invalid_parameter",
            "granularity",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "x" * 3000},
            "invalid_key",
            "2048",
        ),
        ("/v1/top", {"view": "page_activity", "measure": "nope"}, "unknown_measure", "page_views"),
        (
            "/v1/top",
            {"view": "page_activity", "measure": "page_views", "n": 0},
            "invalid_parameter",
            "n:",
        ),
        (
            "/v1/top",
            {"view": "page_activity", "measure": "page_views", "n": "ten"},
            "invalid_parameter",
            "integer",
        ),
        (
            "/v1/top",
            {"view": "page_activity", "measure": "load_sketch", "quantile": 2},
            "invalid_parameter",
            "quantile",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "quantile": [0.5, 1.5]},
            "invalid_quantile",
            "[0, 1]",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "quantile": "nan"},
            "invalid_quantile",
            "nan",
        ),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "quantile": [i / 20 for i in range(11)]},
            "too_many_quantiles",
            "at most 10",
        ),
        (
            "/v1/top",
            {"view": "page_activity", "measure": "page_views", "start": "now-5d"},
            "range_too_large",
            "7200 partitions",
        ),
        ("/v1/reach", {"view": "clicks"}, "invalid_parameter", "view"),
        ("/v1/reach", {"view": "page_activity"}, "missing_key", "path"),
    ],
)
def test_bad_input_is_a_4xx_with_a_message(
    api: httpx.Client, path: str, params: dict, code: str, words: str
) -> None:
    answer = api.get(path, params=params)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == code
    assert words in body["message"]


@pytest.mark.parametrize(
    ("path", "params", "name"),
    [
        ("/v1/timeseries", {"view": "page_activity", "key": "/", "start": "now-9999999d"}, "start"),
        (
            "/v1/timeseries",
            {"view": "page_activity", "key": "/", "end": "9999-12-31T23:59:59-05:00"},
            "end",
        ),
        (
            "/v1/top",
            {"view": "page_activity", "measure": "page_views", "start": "now-9999999d"},
            "start",
        ),
        (
            "/v1/reach",
            {
                "view": "page_activity",
                "key": "/",
                "start": "9999-12-31T00:00:00Z",
                "end": "9999-12-31T23:59:59-05:00",
            },
            "start",
        ),
    ],
)
def test_extreme_times_are_a_400_naming_the_parameter_and_the_range(
    api: httpx.Client, path: str, params: dict, name: str
) -> None:
    answer = api.get(path, params=params)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == "invalid_range"
    assert body["message"].startswith(f"{name}=")
    assert "1970-01-01T00:00:00Z" in body["message"] and "9999-01-01T00:00:00Z" in body["message"]


def test_a_timeseries_shows_the_quantiles_asked(api: httpx.Client) -> None:
    params = {"view": "page_activity", "key": "/", "measure": "load_sketch", **RANGE}
    answer = api.get("/v1/timeseries", params={**params, "quantile": [0.9, 0.999]})
    assert answer.status_code == 200, answer.text
    bucket = answer.json()["series"][0]["buckets"][0]
    assert set(bucket) - {"start", "final", "source", "available"} == {
        "load_sketch_n",
        "load_sketch_p90",
        "load_sketch_p99_9",
    }
    hourly = api.get("/v1/timeseries", params={**params, "quantile": 0.9, "granularity": "hour"})
    assert hourly.status_code == 200, hourly.text
    assert "load_sketch_p90" in hourly.json()["series"][0]["buckets"][0]


@pytest.mark.parametrize(
    "key",
    [
        "'; DROP TABLE speed_page_activity; --",
        "/a' OR '1'='1",
        '/a" ALLOW FILTERING',
        "/\u00e9t\u00e9/\U0001f600",
        "%27%3B--",
    ],
)
def test_injection_strings_as_keys_are_just_keys(api: httpx.Client, key: str) -> None:
    answer = api.get("/v1/timeseries", params={"view": "page_activity", "key": key, **RANGE})
    assert answer.status_code == 200, answer.text
    series = answer.json()["series"][0]
    assert series["key"] == {"path": key}
    assert sum(b["page_views"] for b in series["buckets"]) == 0
    reach = api.get("/v1/reach", params={"view": "page_activity", "key": key, **RANGE})
    assert reach.status_code == 200 and reach.json()["visitors"] == 0
    # The tables are still there.
    again = api.get("/v1/top", params={"view": "page_activity", "measure": "page_views", **RANGE})
    assert again.status_code == 200


def test_openapi_documents_the_routes_and_the_token(api: httpx.Client) -> None:
    spec = api.get("/openapi.json").json()
    assert {"/v1/timeseries", "/v1/top", "/v1/reach", "/v1/views", "/health"} <= set(spec["paths"])
    schemes = spec["components"]["securitySchemes"]
    assert any(s.get("scheme") == "bearer" for s in schemes.values())
    assert spec["paths"]["/v1/timeseries"]["get"]["security"]


def test_views_lists_keys_and_measures(api: httpx.Client) -> None:
    views = {v["view"]: v for v in api.get("/v1/views").json()}
    assert views["page_activity"]["keys"] == ["path"]
    kinds = {m["name"]: m["kind"] for m in views["page_activity"]["measures"]}
    assert kinds["load_sketch"] == "kll" and kinds["visitors"] == "hll"
    # Every declared pipeline's views, each named with its pipeline.
    assert views["page_activity"]["pipeline"] == "web_events"
    assert views["orders_by_currency"]["pipeline"] == "checkouts"
    assert views["orders_by_currency"]["keys"] == ["currency"]


def test_the_dashboard_page_loads_nothing_from_elsewhere(serving_url: str) -> None:
    page = httpx.get(f"{serving_url}/dashboard")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "https://" not in page.text and "http://" not in page.text
    assert httpx.get(serving_url, follow_redirects=False).headers["location"] == "/dashboard"


def test_an_idle_connection_is_still_answered_after_a_client_pause(serving_url: str) -> None:
    # HTTP libraries drop idle connections after about 5 s (httpx, Node); a server that
    # closes at the same moment resets requests sent on them, which clients see unanswered.
    host, port = serving_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    statuses = []
    for pause_s in (0, 6):
        time.sleep(pause_s)
        connection.request("GET", "/v1/views")
        answer = connection.getresponse()
        answer.read()
        statuses.append(answer.status)
    connection.close()
    assert statuses == [401, 401]
