"""The hot path: answers already shared, written without the web framework's per-request work.

A dashboard's viewers ask the same few questions every few seconds, so
almost every request is answered from the worker's shared answers
(:mod:`serving.cache`) by a query core that costs about 25 µs, while the
whole request cost a worker about 0.45 ms through FastAPI: solving the
route's dependencies and validating its parameters, the request metrics'
``BaseHTTPMiddleware`` (a task group and two streams per request), routing,
the response classes (``docs/benchmarks.md``, "The hot path").
:class:`HotPath`, a plain ASGI middleware, answers a ``GET`` of
``/v1/timeseries``, ``/v1/top`` or ``/v1/reach`` itself when it can be
certain of the answer:

- the bearer credential proves an identity that may read the view asked for
  (:class:`serving.gate.Gate`, the route's own checks, after the same parsing of
  ``Authorization``);
- every parameter is one the route declares, given once unless it is a list,
  and written in a form whose value FastAPI would read the same (plain
  decimals, texts within their lengths, one of the choices); absent ones
  take the route's defaults;
- the query core, asked ``cached_only``, has the answer kept, or the answer over the
  previous speed micro-batch (``stale``) while the new one is computed (a micro-batch
  makes every question over speed windows new, and a request must not wait for it).

Anything else, a missing or unknown token, a malformed, unknown or repeated
parameter, an answer not kept yet (it must be computed, perhaps shared with
other requests) or any error, goes on to FastAPI unchanged: the framework
stays the one place that says what was wrong. The body is the same JSON with
the same headers (``content-length``, ``content-type``) as the route's
(``tests/unit/serving/test_hot_path.py`` compares them byte for byte), and
every request, hot or not, is counted and timed here by its route
(``wap_serving_requests_total``, ``wap_serving_request_duration_seconds``), and
each read of data is its audit record (:meth:`serving.gate.Gate.record`, from
what the route, or the hot path, noted of it).
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import orjson
from fastapi.security.utils import get_authorization_scheme_param

from access import Identity
from serving import questions
from serving.gate import Gate
from serving.lru import Lru
from serving.merge import DEFAULT_QUANTILES
from serving.metrics import ServingMetrics
from serving.questions import WHOLE_SITE, ReachView

__all__ = ["ROUTES", "HotPath", "Param", "Route"]

_REQUIRED = object()
_QUERIES = 1024
"""Query strings whose arguments a worker keeps, each of at most ``_QUERY_CHARS`` (a
dashboard's are about 150)."""
_QUERY_CHARS = 1024
_DECIMAL = re.compile(r"[0-9]{1,17}(?:\.[0-9]{1,17})?")
_COUNT = re.compile(r"[1-9][0-9]{0,8}")


@dataclass(frozen=True)
class Param:
    """One query parameter of a route: how its text is read, whether it repeats (a tuple),
    its default (``_REQUIRED``: none). ``read`` raises ValueError for a text it cannot be
    certain FastAPI reads as it does."""

    read: Callable[[str], Any]
    many: bool = False
    default: Any = _REQUIRED


def _text(limit: int | None = None) -> Callable[[str], str]:
    def read(value: str) -> str:
        if limit is not None and len(value) > limit:
            raise ValueError(value)
        return value

    return read


def _choice(*values: str) -> Callable[[str], str]:
    def read(value: str) -> str:
        if value not in values:
            raise ValueError(value)
        return value

    return read


def _count(lo: int, hi: int) -> Callable[[str], int]:
    def read(value: str) -> int:
        if not _COUNT.fullmatch(value) or not lo <= int(value) <= hi:
            raise ValueError(value)
        return int(value)

    return read


def _decimal(lo: float = float("-inf"), hi: float = float("inf")) -> Callable[[str], float]:
    def read(value: str) -> float:
        if not _DECIMAL.fullmatch(value) or not lo <= float(value) <= hi:
            raise ValueError(value)
        return float(value)

    return read


@dataclass(frozen=True)
class Route:
    """A data route the hot path answers: its path (the metrics' label), its parameters as
    the FastAPI route declares them, and the question it asks."""

    path: str
    params: Mapping[str, Param]
    ask: Callable[..., Awaitable[dict[str, Any] | None]]

    def arguments(self, query_string: bytes) -> dict[str, Any] | None:
        """The route's arguments from the query string, read as Starlette splits it (lists as
        tuples); None when one is unknown, repeated, missing or not certain."""
        given: dict[str, Any] = {}
        for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
            param = self.params.get(name)
            if param is None or (name in given and not param.many):
                return None
            if param.many:
                given[name] = (*given.get(name, ()), param.read(value))
            else:
                given[name] = param.read(value)
        for name, param in self.params.items():
            if name not in given:
                if param.default is _REQUIRED:
                    return None
                given[name] = param.default
        return given


_START = Param(_text(64), default="now-1h")
_END = Param(_text(64), default="now")

ROUTES = {
    route.path: route
    for route in (
        Route(
            "/v1/timeseries",
            {
                "view": Param(_text()),
                "key": Param(_text(), many=True, default=()),
                "start": _START,
                "end": _END,
                "granularity": Param(_choice("minute", "hour", "day"), default="minute"),
                "quantile": Param(_decimal(), many=True, default=tuple(DEFAULT_QUANTILES)),
                "measure": Param(_text(), many=True, default=()),
            },
            questions.timeseries,
        ),
        Route(
            "/v1/top",
            {
                "view": Param(_text()),
                "measure": Param(_text(64)),
                "start": _START,
                "end": _END,
                "n": Param(_count(1, 100), default=10),
                "quantile": Param(_decimal(0.0, 1.0), default=0.95),
                "min_samples": Param(_count(1, 10**9), default=1),
            },
            questions.top,
        ),
        Route(
            "/v1/reach",
            {
                "view": Param(_choice(*ReachView), default=WHOLE_SITE.value),
                "key": Param(_text(), default=None),
                "start": _START,
                "end": _END,
            },
            questions.reach,
        ),
    )
}
"""The routes the dashboard polls, by path; their parameters as :mod:`serving.app` declares
them (a test compares the two)."""


class HotPath:
    """ASGI middleware: answers kept for the :data:`ROUTES` written at once, every other
    request passed to ``app``; every request counted and timed in ``metrics``.

    ``state["queries"]`` is the worker's :class:`serving.query.Queries` (set at start-up;
    until then every request goes to ``app``); ``answer=False`` only counts and times.
    """

    def __init__(
        self,
        app: Any,
        *,
        gate: Gate,
        state: Mapping[str, Any],
        metrics: ServingMetrics,
        answer: bool = True,
    ) -> None:
        self.app = app
        self.gate = gate
        self.state = state
        self.metrics = metrics
        self.routes = ROUTES if answer else {}
        self._arguments = Lru(_QUERIES)
        """Arguments by route and query string: a dashboard sends the same few."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        route = self.routes.get(scope["path"]) if scope["method"] == "GET" else None
        body, noted = None, {}
        if route is not None and not scope.get("root_path"):
            body = await self._kept(route, scope, noted)
        status = 500

        async def sending(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if body is None:
                await self.app(scope, receive, sending)
            else:
                headers = [
                    (b"content-length", str(len(body)).encode()),
                    (b"content-type", b"application/json"),
                ]
                await sending({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
        finally:
            path = route.path if body is not None else getattr(scope.get("route"), "path", None)
            took = time.perf_counter() - started
            self.metrics.observe_request(path or "unmatched", status, took)
            read = self.gate.record(
                path or scope["path"], status, took, noted or scope.get("state", {})
            )
            if read is not None:
                why = "" if read.reason is None else read.reason.split(":", 1)[0]
                self.metrics.observe_read(
                    ",".join(read.teams) or "none", f"{read.outcome} {why}".strip()
                )

    async def _kept(self, route: Route, scope: dict, noted: dict) -> bytes | None:
        """The body of the kept answer to this request, or None: FastAPI answers it. What
        the audit record needs is put in ``noted`` when this path answers."""
        queries = self.state.get("queries")
        identity = None if queries is None else self._identity(scope["headers"])
        if identity is None:
            return None
        try:
            asked = (route.path, scope["query_string"])
            arguments = self._arguments.get(asked)
            if arguments is None:
                arguments = route.arguments(asked[1])
                if arguments is None:
                    return None
                if len(asked[1]) <= _QUERY_CHARS:
                    self._arguments.put(asked, arguments)
            if not self.gate.may_read(identity, arguments["view"]):
                return None  # the route refuses it, and says why
            answer = await route.ask(queries, **arguments, cached_only=True)
        except Exception:  # refused, malformed or failing: the framework answers and says why
            return None
        if answer is None:
            return None
        noted.update(identity=identity, view=arguments["view"], rows=getattr(answer, "rows", None))
        return orjson.dumps(answer)

    def _identity(self, headers: list[tuple[bytes, bytes]]) -> Identity | None:
        """The route's check (``HTTPBearer`` then the gate) of the first ``Authorization``
        header, as Starlette reads headers."""
        value = next((v.decode("latin-1") for k, v in headers if k == b"authorization"), None)
        scheme, credentials = get_authorization_scheme_param(value)
        if not (value and scheme and credentials) or scheme.lower() != "bearer":
            return None
        return self.gate.identify(credentials)
