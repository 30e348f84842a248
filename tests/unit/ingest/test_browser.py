"""Browser conventions: one-letter paths, the beacon's write key, CORS per source."""

from __future__ import annotations

import asyncio
import base64

import httpx
import pytest
from fastapi import FastAPI, Request

from core.settings import CollectorSettings
from ingest.browser import (
    ALIASES,
    BrowserConventions,
    OriginPolicy,
    add_browser_routes,
    segment_settings,
)

SHOP = "https://shop.example"
SHOP_KEY = "shop-write-key-0001"
POLICY = OriginPolicy({"shop": (SHOP,), "local": ("*",)})
STRICT = OriginPolicy({"shop": (SHOP,)})


def _echo_app(policy: OriginPolicy) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/{name}")
    async def echo(name: str, request: Request) -> dict:
        return {
            "endpoint": name,
            "authorization": request.headers.get("authorization"),
            "body": (await request.body()).decode(),
        }

    app.add_middleware(BrowserConventions, policy=policy)
    return app


def _call(app: FastAPI, method: str, path: str, **kwargs) -> httpx.Response:
    async def run() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://collector") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(run())


@pytest.mark.parametrize(("alias", "target"), sorted(ALIASES.items()))
def test_short_paths_reach_the_collector_endpoints(alias: str, target: str) -> None:
    answer = _call(_echo_app(POLICY), "POST", alias, content=b"{}")
    assert answer.status_code == 200
    assert answer.json()["endpoint"] == target.rsplit("/", 1)[1]


def test_the_beacon_write_key_becomes_the_basic_user() -> None:
    answer = _call(_echo_app(POLICY), "POST", "/beacon/v1/batch?writeKey=wk-1", content=b"{}")
    user = base64.b64decode(answer.json()["authorization"].split()[1]).decode()
    assert user == "wk-1:"


def test_analytics_js_usage_counters_are_answered_and_dropped() -> None:
    answer = _call(_echo_app(POLICY), "POST", "/v1/m", content=b'{"series": []}')
    assert answer.status_code == 200 and answer.json() == {"success": True}


def _preflight(policy: OriginPolicy, origin: str, **extra: str) -> httpx.Response:
    headers = {
        "origin": origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization,content-type,x-retry-count",
        **extra,
    }
    return _call(_echo_app(policy), "OPTIONS", "/v1/t", headers=headers)


def test_a_preflight_from_an_allowed_origin_allows_the_call() -> None:
    answer = _preflight(STRICT, SHOP)
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == SHOP
    assert answer.headers["access-control-allow-credentials"] == "true"
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert answer.headers["access-control-allow-headers"] == (
        "authorization,content-type,x-retry-count"
    )
    assert int(answer.headers["access-control-max-age"]) > 0
    assert "Origin" in answer.headers["vary"]


def test_a_preflight_from_another_origin_is_refused() -> None:
    answer = _preflight(STRICT, "https://evil.example")
    assert answer.status_code == 403
    assert "access-control-allow-origin" not in answer.headers
    assert answer.json()["error"] == "origin_not_allowed"


def test_any_origin_is_allowed_by_a_wildcard_source_and_echoed() -> None:
    answer = _preflight(POLICY, "http://localhost:3000")
    assert answer.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_private_network_preflights_are_answered() -> None:
    answer = _preflight(STRICT, SHOP, **{"access-control-request-private-network": "true"})
    assert answer.headers["access-control-allow-private-network"] == "true"


def test_answers_carry_cors_headers_only_for_allowed_origins() -> None:
    allowed = _call(_echo_app(STRICT), "POST", "/v1/t", content=b"{}", headers={"origin": SHOP})
    assert allowed.headers["access-control-allow-origin"] == SHOP
    assert allowed.headers["access-control-expose-headers"] == "Retry-After"
    other = _call(
        _echo_app(STRICT), "POST", "/v1/t", content=b"{}", headers={"origin": "https://x.example"}
    )
    assert "access-control-allow-origin" not in other.headers
    server = _call(_echo_app(STRICT), "POST", "/v1/track", content=b"{}")
    assert "access-control-allow-origin" not in server.headers


def test_the_policy_refuses_an_origin_per_source() -> None:
    assert POLICY.refusal(None, "shop") is None  # server libraries send no Origin
    assert POLICY.refusal(SHOP, "shop") is None
    assert POLICY.refusal("https://evil.example", "local") is None
    refusal = POLICY.refusal("https://evil.example", "shop")
    assert refusal and "https://evil.example" in refusal and "ALLOWED_ORIGINS" in refusal
    assert POLICY.refusal(SHOP, "unlisted") is not None


def _documents_app(tmp_path, **collector) -> FastAPI:
    bundles = tmp_path / "@segment" / "analytics-next" / "dist" / "umd"
    bundles.mkdir(parents=True)
    (bundles / "standalone.js").write_text("/* analytics.js */")
    (bundles / "auto-track.bundle.1.js").write_text("/* part */")
    settings = CollectorSettings(
        write_keys={"shop": SHOP_KEY, "local": "local-write-key-0001"},
        allowed_origins={"shop": (SHOP,), "local": ("*",)},
        **collector,
    )
    app = FastAPI()
    add_browser_routes(app, settings, tmp_path)
    app.add_middleware(BrowserConventions, policy=OriginPolicy(settings.allowed_origins))
    return app


def test_the_settings_document_points_analytics_js_at_the_collector(tmp_path) -> None:
    answer = _call(_documents_app(tmp_path), "GET", f"/v1/projects/{SHOP_KEY}/settings")
    assert answer.status_code == 200
    segment = answer.json()["integrations"]["Segment.io"]
    assert segment["apiHost"] == "collector/v1" and segment["protocol"] == "http"
    assert segment["apiKey"] == SHOP_KEY
    assert answer.json()["remotePlugins"] == []
    public = _documents_app(tmp_path / "p", public_url="https://collect.shop.example")
    segment = _call(public, "GET", f"/v1/projects/{SHOP_KEY}/settings").json()["integrations"]
    assert segment["Segment.io"]["apiHost"] == "collect.shop.example/v1"
    assert segment["Segment.io"]["protocol"] == "https"


def test_documents_are_refused_for_unknown_keys_and_disallowed_origins(tmp_path) -> None:
    app = _documents_app(tmp_path)
    assert _call(app, "GET", "/v1/projects/nope/settings").status_code == 404
    evil = {"origin": "https://evil.example"}
    refused = _call(app, "GET", f"/v1/projects/{SHOP_KEY}/settings", headers=evil)
    assert refused.status_code == 403 and refused.json()["error"] == "origin_not_allowed"
    allowed = _call(app, "GET", f"/v1/projects/{SHOP_KEY}/settings", headers={"origin": SHOP})
    assert allowed.headers["access-control-allow-origin"] == SHOP
    config = _call(app, "GET", f"/sourceConfig/?p=npm&writeKey={SHOP_KEY}").json()
    assert config["source"]["id"] == "shop" and config["source"]["destinations"] == []


def test_the_collector_serves_analytics_js_and_its_parts(tmp_path) -> None:
    app = _documents_app(tmp_path)
    script = _call(app, "GET", f"/analytics.js/v1/{SHOP_KEY}/analytics.min.js")
    assert script.status_code == 200 and script.text == "/* analytics.js */"
    assert "javascript" in script.headers["content-type"]
    part = _call(app, "GET", "/analytics-next/bundles/auto-track.bundle.1.js")
    assert part.text == "/* part */"
    assert _call(app, "GET", "/analytics.js/v1/nope/analytics.min.js").status_code == 404
    assert _call(app, "GET", "/analytics-next/bundles/..%2Fsecret.js").status_code == 404
    missing = _call(_documents_app(tmp_path / "empty"), "GET", "/analytics-next/bundles/x.js")
    assert missing.status_code == 404 and "make install" in missing.json()["message"]


def test_the_settings_document_has_what_analytics_js_reads() -> None:
    document = segment_settings("k", "collector.example/v1", "https")
    assert set(document["integrations"]) == {"Segment.io"}
    assert document["metrics"]["sampleRate"] == 0


def test_browser_calls_lose_the_write_key_and_an_empty_user_id() -> None:
    from ingest.browser import clean_browser_calls

    body = {"writeKey": "k", "batch": [{"type": "page", "writeKey": "k", "userId": ""}, "x"]}
    assert clean_browser_calls(body) == {"batch": [{"type": "page"}, "x"]}
    call = {"type": "track", "userId": "u-1", "event": "E"}
    assert clean_browser_calls(call) is call
