"""The Tracking API as browsers use it: short paths, CORS per source, self-hosted analytics.js.

Segment's analytics.js (``@segment/analytics-next``) posts each call to
``{apiHost}/t``, ``/p``, ``/i``, ``/g``, ``/a``, ``/s`` (the call type's first
letter), batches to ``/b`` and its own usage counters to ``/m``, as
``text/plain`` JSON with the write key in the body and as HTTP Basic user.
RudderStack's JavaScript SDK posts to ``/v1/<type>`` and ``/v1/batch`` and,
with ``useBeacon``, to ``/beacon/v1/batch?writeKey=...``. :class:`BrowserConventions`
maps these onto the collector's endpoints and answers CORS; the routes of
:func:`add_browser_routes` serve what the libraries load before they send:
the settings document (analytics.js: ``/v1/projects/{writeKey}/settings``;
RudderStack: ``/sourceConfig/``) and analytics.js itself, so that a website's
tracking needs no other host than the collector.

CORS is per source (``CollectorSettings.allowed_origins``). A preflight
carries no write key, so it is answered for an origin that some source
allows; the request itself is refused (403) by the collector when its source
does not allow its origin (:meth:`OriginPolicy.refusal`), which matters for
simple requests that no preflight guards.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from core.log import get_logger, log_event
from core.settings import CollectorSettings

__all__ = [
    "ALIASES",
    "BrowserConventions",
    "OriginPolicy",
    "add_browser_routes",
    "clean_browser_calls",
    "rudderstack_source_config",
    "segment_settings",
]

_log = get_logger(__name__)

ALIASES = {
    "/v1/t": "/v1/track",
    "/v1/p": "/v1/page",
    "/v1/i": "/v1/identify",
    "/v1/g": "/v1/group",
    "/v1/a": "/v1/alias",
    "/v1/s": "/v1/screen",
    "/v1/b": "/v1/batch",
    "/beacon/v1/batch": "/v1/batch",
}
"""analytics.js's one-letter paths and RudderStack's beacon path -> the collector's endpoint."""

_METRICS_PATH = "/v1/m"
_PREFLIGHT_MAX_AGE_S = 7200  # Chromium's cap
_ALLOWED_METHODS = "GET, POST, OPTIONS"
_HEADER_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")
_BUNDLE_NAME = re.compile(r"[A-Za-z0-9_.-]+\.js")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class OriginPolicy:
    """Which page origins may send which source's events (``allowed_origins``).

    >>> policy = OriginPolicy({"shop": ("https://shop.example",), "dev": ("*",)})
    >>> policy.allows("shop", "https://shop.example"), policy.allows("shop", "https://evil.example")
    (True, False)
    >>> policy.allows_any_source("https://evil.example")
    True
    >>> OriginPolicy({"shop": ("https://shop.example",)}).allows_any_source("https://evil.example")
    False
    """

    def __init__(self, allowed_origins: Mapping[str, tuple[str, ...]]) -> None:
        self._by_source = {source: frozenset(o) for source, o in allowed_origins.items()}
        self._wildcard = any("*" in origins for origins in self._by_source.values())
        self._anywhere = frozenset().union(*self._by_source.values())

    def allows(self, source_id: str, origin: str) -> bool:
        origins = self._by_source.get(source_id, frozenset())
        return "*" in origins or origin in origins

    def allows_any_source(self, origin: str) -> bool:
        return self._wildcard or origin in self._anywhere

    def refusal(self, origin: str | None, source_id: str) -> str | None:
        """Why a request from ``origin`` may not send ``source_id``'s events; None if it may."""
        if origin is None or self.allows(source_id, origin):
            return None
        return (
            f"Origin {origin} may not send events of source {source_id!r}; add it to the "
            "source's WAP_COLLECTOR__ALLOWED_ORIGINS."
        )


class BrowserConventions:
    """ASGI middleware: browser paths onto the collector's endpoints, and CORS.

    - ``/v1/t`` ... ``/v1/b`` and ``/beacon/v1/batch`` are routed to the
      collector's endpoints (the beacon's ``?writeKey=`` becomes the Basic user);
    - ``/v1/m`` (analytics.js's own usage counters) is answered 200 and dropped;
    - a preflight from an origin that some source allows gets 204 with the
      requested method and headers allowed; from any other origin 403;
    - answers to an allowed origin carry ``Access-Control-Allow-Origin`` (the
      origin itself, with credentials allowed), so the library reads the status
      and retries or drops as it should.
    """

    def __init__(self, app: Callable[..., Awaitable[None]], policy: OriginPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        origin = headers.get("origin")
        allowed = origin is not None and self.policy.allows_any_source(origin)
        if scope["method"] == "OPTIONS" and "access-control-request-method" in headers:
            await self._preflight(headers, origin if allowed else None, send)
            return
        if scope["path"] == _METRICS_PATH and scope["method"] == "POST":
            await _drain(receive)
            await _json(send, 200, {"success": True}, _cors(origin) if allowed else [])
            return
        target = ALIASES.get(scope["path"])
        if target is not None:
            scope = _routed(scope, target)
        if not allowed:
            await self.app(scope, receive, send)
            return
        extra = _cors(origin)

        async def send_with_cors(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, headers: Mapping[str, str], origin: str | None, send: Send) -> None:
        if origin is None:
            await _json(
                send,
                403,
                {
                    "success": False,
                    "error": "origin_not_allowed",
                    "message": f"Origin {headers.get('origin')} may not send events here; add "
                    "it to a source's WAP_COLLECTOR__ALLOWED_ORIGINS.",
                },
                [(b"vary", b"Origin")],
            )
            return
        answer = [
            *_cors(origin),
            (b"access-control-allow-methods", _ALLOWED_METHODS.encode()),
            (b"access-control-max-age", str(_PREFLIGHT_MAX_AGE_S).encode()),
        ]
        requested = headers.get("access-control-request-headers", "").strip()
        if requested and _HEADER_LIST.fullmatch(requested):
            answer.append((b"access-control-allow-headers", requested.encode("latin-1")))
        if headers.get("access-control-request-private-network") == "true":
            answer.append((b"access-control-allow-private-network", b"true"))
        await send({"type": "http.response.start", "status": 204, "headers": answer})
        await send({"type": "http.response.body", "body": b""})


def _cors(origin: str) -> list[tuple[bytes, bytes]]:
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-credentials", b"true"),
        (b"access-control-expose-headers", b"Retry-After"),
        (b"vary", b"Origin"),
    ]


def _routed(scope: Scope, target: str) -> Scope:
    routed = {**scope, "path": target, "raw_path": target.encode()}
    if scope["path"].startswith("/beacon/"):
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        keys = query.get("writeKey") or query.get("writekey")
        has_auth = any(name == b"authorization" for name, _ in scope["headers"])
        if keys and not has_auth:
            token = base64.b64encode(f"{keys[0]}:".encode()).decode()
            routed["headers"] = [*scope["headers"], (b"authorization", f"Basic {token}".encode())]
    return routed


async def _drain(receive: Receive, limit: int = 64 * 1024) -> None:
    size, more = 0, True
    while more and size <= limit:
        message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)


async def _json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]) -> None:
    import orjson

    payload = orjson.dumps(body)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def clean_browser_calls(body: Any) -> Any:
    """``body`` without what browser libraries add around the calls, per call and batch.

    The ``writeKey`` analytics.js puts in every call (a credential, no event
    data) and the empty ``userId`` RudderStack's SDKs send for an anonymous
    visitor (absent, as its own data plane reads it).

    >>> clean_browser_calls({"writeKey": "k", "batch": [{"type": "page", "writeKey": "k"}]})
    {'batch': [{'type': 'page'}]}
    >>> clean_browser_calls({"type": "page", "userId": "", "anonymousId": "a"})
    {'type': 'page', 'anonymousId': 'a'}
    """
    if not isinstance(body, dict):
        return body
    body = _clean(body)
    batch = body.get("batch")
    if isinstance(batch, list) and any(isinstance(e, dict) and _needs_cleaning(e) for e in batch):
        body["batch"] = [_clean(e) if isinstance(e, dict) else e for e in batch]
    return body


def _needs_cleaning(call: dict[str, Any]) -> bool:
    return "writeKey" in call or call.get("userId") == ""


def _clean(call: dict[str, Any]) -> dict[str, Any]:
    if not _needs_cleaning(call):
        return call
    return {k: v for k, v in call.items() if k != "writeKey" and not (k == "userId" and v == "")}


def segment_settings(write_key: str, api_host: str, protocol: str) -> dict[str, Any]:
    """The settings document analytics.js loads (``{cdnURL}/v1/projects/{writeKey}/settings``).

    Only the Segment.io destination, sending to ``{protocol}://{api_host}``; no
    device-mode integrations, remote plugins or middleware to fetch from
    elsewhere, and analytics.js's own usage counters off.
    """
    return {
        "integrations": {
            "Segment.io": {
                "apiKey": write_key,
                "apiHost": api_host,
                "protocol": protocol,
                "unbundledIntegrations": [],
                "addBundledMetadata": True,
                "maybeBundledConfigIds": {},
            }
        },
        "plan": {
            "track": {"__default": {"enabled": True, "integrations": {}}},
            "identify": {"__default": {"enabled": True}},
            "group": {"__default": {"enabled": True}},
        },
        "analyticsNextEnabled": True,
        "middlewareSettings": {},
        "enabledMiddleware": {},
        "metrics": {"sampleRate": 0},
        "legacyVideoPluginsEnabled": False,
        "remotePlugins": [],
    }


def rudderstack_source_config(source_id: str, write_key: str) -> dict[str, Any]:
    """The source configuration RudderStack's JavaScript SDK loads (``/sourceConfig/``)."""
    return {
        "isHosted": False,
        "source": {
            "id": source_id,
            "name": source_id,
            "writeKey": write_key,
            "enabled": True,
            "workspaceId": "web-activity-platform",
            "config": {"statsCollection": {"errors": {"enabled": False}}},
            "destinations": [],
        },
    }


def add_browser_routes(app: FastAPI, collector: CollectorSettings, library_dir: Path) -> None:
    """The documents and the bundle a website loads from the collector.

    ``library_dir``: the ``node_modules`` holding ``@segment/analytics-next``.
    """
    sources = collector.source_of()
    policy = OriginPolicy(collector.allowed_origins)
    bundles = library_dir / "@segment" / "analytics-next" / "dist" / "umd"

    def _known(request: Request, write_key: str | None) -> str | JSONResponse:
        source = sources.get(write_key or "")
        if source is None:
            return JSONResponse(
                {"success": False, "error": "unknown_write_key", "message": "Unknown write key."},
                404,
            )
        refusal = policy.refusal(request.headers.get("origin"), source)
        if refusal is not None:
            return JSONResponse(
                {"success": False, "error": "origin_not_allowed", "message": refusal}, 403
            )
        return source

    @app.get("/v1/projects/{write_key}/settings", summary="analytics.js settings of a source")
    async def analytics_js_settings(request: Request, write_key: str) -> Response:
        source = _known(request, write_key)
        if isinstance(source, Response):
            return source
        base = collector.public_url or str(request.base_url)
        scheme, _, rest = base.rstrip("/").partition("://")
        return JSONResponse(
            segment_settings(write_key, f"{rest}/v1", scheme),
            headers={"cache-control": "public, max-age=60"},
        )

    @app.get("/sourceConfig/", summary="RudderStack JavaScript SDK source configuration")
    async def rudderstack_config(request: Request) -> Response:
        write_key = request.query_params.get("writeKey")
        source = _known(request, write_key)
        if isinstance(source, Response):
            return source
        return JSONResponse(rudderstack_source_config(source, write_key or ""))

    def _bundle(name: str) -> Response:
        path = bundles / name
        if not path.is_file():
            # Where it was looked for goes to the operator's log, never to a website.
            log_event(_log, "browser.bundle_missing", name=name, path=str(path))
            return JSONResponse(
                {
                    "success": False,
                    "error": "not_installed",
                    "message": f"The analytics.js bundle {name!r} is not installed on this "
                    "collector; its operator runs `make install` (the collector's log says "
                    "where it looked).",
                },
                404,
            )
        media_type = mimetypes.guess_type(name)[0] or "application/javascript"
        return FileResponse(path, media_type=media_type, headers={"cache-control": "max-age=300"})

    @app.get(
        "/analytics.js/v1/{write_key}/analytics.min.js",
        summary="analytics.js for the standard snippet",
    )
    async def analytics_js(write_key: str) -> Response:
        if write_key not in sources:
            return JSONResponse(
                {"success": False, "error": "unknown_write_key", "message": "Unknown write key."},
                404,
            )
        return _bundle("standalone.js")

    @app.get("/analytics-next/bundles/{name}", summary="analytics.js's lazily loaded parts")
    async def analytics_js_part(name: str) -> Response:
        if not _BUNDLE_NAME.fullmatch(name):
            return JSONResponse(
                {"success": False, "error": "not_found", "message": f"No bundle {name!r}."}, 404
            )
        return _bundle(name)
