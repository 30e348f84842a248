"""The serving API: merged answers over HTTP for dashboards and analysts, and the live page.

Every data route is ``GET`` (but ``POST /v1/sql``) and needs a read-only analyst token
(``Authorization: Bearer <token>``, from ``settings.serving.api_tokens``), and so do
``/openapi.json`` and ``/docs``; ``/metrics`` takes one or the operators'
``settings.monitoring.metrics_token`` (Prometheus sends that); ``/health`` and
the dashboard page and its script need none (the page asks for a token).
Times are ISO 8601 (UTC when no zone is given) or ``now``/``now-15m``/``now-2h``;
a range holds the 1-minute windows whose start lies in ``[start, end)``.
Windows before a view's batch boundary are answered from the batch view
(final), the others from the speed view (provisional); every answer says
where the boundary was and how fresh the speed side is. Boundary, day
versions and speed progress are cached per worker for
``settings.serving.pointer_cache_s`` (``pointers_age_s`` in each answer).
"""

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import orjson
from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from access import Directory, Identity
from access.audit import AuditLog
from access.directory import service_identities
from access.store import TokenStore
from core.credentials import owner_of
from core.log import get_logger, log_event
from core.settings import Settings
from core.workers import listening_workers
from pipelines import pipeline_of_view
from serving import questions
from serving.errors import QueryError
from serving.freshness import FreshnessRules
from serving.gate import Answer, Gate
from serving.hot import HotPath
from serving.merge import DEFAULT_QUANTILES
from serving.metrics import ServingMetrics
from serving.query import CacheRules, Limits, Queries
from serving.questions import SERVED_VIEWS, WHOLE_SITE, ReachView
from serving.sql_http import FORMATS, SqlEndpoint
from serving.store import ServingStore

__all__ = ["create_app"]

_log = get_logger(__name__)
_STATIC = Path(__file__).parent / "static"
_bearer = HTTPBearer(
    auto_error=False,
    description="A read-only analyst token from settings.serving.api_tokens.",
)


class SqlRequest(BaseModel):
    """``POST /v1/sql``: a statement over the SQL server's views (docs/sql.md)."""

    model_config = ConfigDict(extra="forbid")
    sql: str = Field(min_length=1, max_length=100_000, description="One read-only statement.")
    params: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description="Named parameters (``:name`` in the statement)."
    )
    max_rows: int | None = Field(default=None, ge=1, description="At most settings.sql.max_rows.")
    timeout_s: float | None = Field(default=None, gt=0, description="At most sql.time_limit_s.")
    format: Literal["json", "csv", "arrow"] = "json"

    EXAMPLES: ClassVar[dict[str, Any]] = {
        "top_pages": {
            "summary": "Top pages by merged views since a time",
            "value": {
                "sql": "SELECT path, sum(page_views) AS views FROM serving_page_activity "
                "WHERE window_start >= :start GROUP BY path ORDER BY views DESC LIMIT 10",
                "params": {"start": "2024-01-01T00:00:00Z"},
            },
        }
    }


class _Json(Response):
    media_type = "application/json"

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


def _answer(request: Request, answer: Answer | None) -> _Json:
    """A data route's answer; its rows noted for the request's audit record."""
    request.state.rows = getattr(answer, "rows", None)
    return _Json(answer)


def _error(status: int, code: str, message: str, **headers: str) -> _Json:
    return _Json({"error": code, "message": message}, status, headers or None)


class _Unauthorized(Exception):
    def __init__(self, message: str) -> None:
        self.message = message


def _static(name: str) -> str:
    """A file of the dashboard (``serving/static/``), read once when the app is built."""
    path = _STATIC / name
    return path.read_text() if path.exists() else f"{name} is missing from serving/static/"


def create_app(
    settings: Settings,
    queries: Queries | None = None,
    gate: Gate | None = None,
) -> FastAPI:
    """Build the serving app; it connects to Cassandra at start-up unless ``queries`` is given
    (then ``gate`` identifies credentials and keeps the audit records: by default the
    settings' service tokens only, and the audit log without its topic)."""
    serving = settings.serving
    operators = [
        *service_identities(settings),
        ("operator", settings.monitoring.metrics_token.get_secret_value().encode()),
    ]
    gate = gate or Gate(Directory(settings), AuditLog(settings, kafka=queries is None))
    directory = gate.directory
    limits = Limits.from_settings(serving)
    state: dict[str, Any] = {}
    metrics = ServingMetrics()

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        cluster = None
        if queries is None:
            from core.cassandra import connect

            cluster, session = connect(settings.cassandra)
            directory.store = TokenStore(session, settings.cassandra.keyspace)
            directory.start()  # issued tokens, re-read every access.refresh_s
            store = ServingStore(
                session,
                settings.cassandra.keyspace,
                pointer_cache_s=serving.pointer_cache_s,
                batch_cache_entries=serving.batch_cache_entries,
            )
            state["queries"] = Queries(
                store,
                limits,
                rules=FreshnessRules.from_settings(settings),
                cache=CacheRules.from_settings(serving),
            )
        else:
            state["queries"] = queries
        await state["queries"].store.pointers()
        state["sql"] = SqlEndpoint(settings.sql)
        log_event(_log, "serving.started", keyspace=settings.cassandra.keyspace)
        yield
        state["sql"].close()
        directory.stop()
        if gate.audit is not None:
            gate.audit.close()
        if cluster is not None:
            cluster.shutdown()
        log_event(_log, "serving.stopped")

    app = FastAPI(
        title="Web activity serving API",
        version="1",
        description=__doc__,
        lifespan=lifespan,
        default_response_class=_Json,
        docs_url=None,  # both served below, behind the analyst token
        redoc_url=None,
        openapi_url=None,
    )

    # Counts and times every request; answers kept for the dashboard's routes at once.
    app.add_middleware(HotPath, gate=gate, state=state, metrics=metrics, answer=serving.hot_path)

    @app.exception_handler(QueryError)
    async def _query_error(request: Request, error: QueryError) -> Response:
        request.state.reason = f"{error.code}: {error.message}"
        return _error(error.status, error.code, error.message)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, error: RequestValidationError) -> Response:
        request.state.reason = "invalid_parameter"
        parts = []
        for item in error.errors():
            where = ".".join(str(p) for p in item.get("loc", ())[1:]) or "request"
            parts.append(f"{where}: {item.get('msg')} (got {item.get('input')!r})")
        return _error(400, "invalid_parameter", "; ".join(parts))

    @app.exception_handler(_Unauthorized)
    async def _unauthorized(request: Request, error: _Unauthorized) -> Response:
        request.state.reason = "unauthenticated"
        return _error(401, "unauthorized", error.message, **{"WWW-Authenticate": "Bearer"})

    async def analyst(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> Identity:
        if credentials is None:
            raise _Unauthorized("Send a read-only analyst token: Authorization: Bearer <token>.")
        found = gate.identify(credentials.credentials)
        if found is None:  # unknown, expired, revoked or malformed: never which
            raise _Unauthorized("Unknown token.")
        request.state.identity = found
        return found

    Analyst = Annotated[Identity, Depends(analyst)]

    async def operator(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> str:
        found = owner_of(credentials.credentials, operators) if credentials else None
        if found is None:
            raise _Unauthorized(
                "Send an analyst token or the metrics token (settings.monitoring.metrics_token): "
                "Authorization: Bearer <token>."
            )
        return found

    def granted(request: Request, identity: Identity, view: str) -> str:
        """``view`` once ``identity`` may read it (else 403), noted for the audit record."""
        request.state.view = view
        gate.check(identity, view)
        return view

    View = Annotated[
        str, Query(description="A view granted to the caller (GET /v1/views lists them)")
    ]
    Start = Annotated[
        str, Query(description="Range start: ISO 8601 or now-<n>{s,m,h,d}", max_length=64)
    ]
    End = Annotated[str, Query(description="Range end (exclusive)", max_length=64)]

    @app.get("/v1/views", summary="The views of every pipeline, their keys and measures")
    async def views(request: Request, identity: Analyst) -> Response:
        granted = gate.views_of(identity)
        listed = [s for s in SERVED_VIEWS if s.name in granted]
        request.state.views, request.state.rows = tuple(s.name for s in listed), len(listed)
        return _Json(
            [
                {
                    "view": s.name,
                    "pipeline": pipeline_of_view(s.name).name,
                    "description": s.description,
                    "keys": list(s.keys),
                    "constant_key": None if s.constant_key is None else list(s.constant_key),
                    "measures": [
                        {"name": m.name, "kind": m.kind, "description": m.description}
                        for m in s.measures
                    ],
                }
                for s in listed
            ]
        )

    @app.get("/v1/timeseries", summary="Merged buckets of a view for one or more keys")
    async def timeseries(
        request: Request,
        identity: Analyst,
        view: View,
        key: Annotated[
            list[str], Query(description="Key value(s); one series each (site: 'all')")
        ] = [],  # noqa: B006 - FastAPI reads the default, never mutates it
        start: Start = "now-1h",
        end: End = "now",
        granularity: Literal["minute", "hour", "day"] = "minute",
        quantile: Annotated[
            list[float],
            Query(description="Quantiles of kll measures, each in [0, 1]; at most 10"),
        ] = list(DEFAULT_QUANTILES),  # noqa: B006
        measure: Annotated[
            list[str], Query(description="Only these measures (default: all); reads less")
        ] = [],  # noqa: B006
    ) -> Response:
        return _answer(
            request,
            await questions.timeseries(
                state["queries"],
                granted(request, identity, view),
                key,
                start,
                end,
                granularity,
                quantile,
                measure,
            ),
        )

    @app.get("/v1/top", summary="Top-N keys of a view over a range, ranked on merged values")
    async def top(
        request: Request,
        identity: Analyst,
        view: View,
        measure: Annotated[str, Query(description="The measure to rank by", max_length=64)],
        start: Start = "now-1h",
        end: End = "now",
        n: Annotated[int, Query(ge=1, le=100)] = 10,
        quantile: Annotated[float, Query(ge=0, le=1, description="For kll measures")] = 0.95,
        min_samples: Annotated[int, Query(ge=1, description="For kll measures")] = 1,
    ) -> Response:
        return _answer(
            request,
            await questions.top(
                state["queries"],
                granted(request, identity, view),
                measure,
                start,
                end,
                n,
                quantile,
                min_samples,
            ),
        )

    @app.get("/v1/reach", summary="Distinct visitors over a range, for a page or the site")
    async def reach(
        request: Request,
        identity: Analyst,
        view: Annotated[
            ReachView, Query(description="A view with a distinct-count measure")
        ] = WHOLE_SITE,
        key: Annotated[str | None, Query(description="The page path (site: 'all')")] = None,
        start: Start = "now-1h",
        end: End = "now",
    ) -> Response:
        name = granted(request, identity, view.value)
        return _answer(request, await questions.reach(state["queries"], name, key, start, end))

    @app.post("/v1/sql", summary="One read-only Spark SQL statement over the views")
    async def sql(
        http: Request,
        _: Analyst,
        credentials: Annotated[HTTPAuthorizationCredentials, Depends(_bearer)],
        request: Annotated[SqlRequest, Body(openapi_examples=SqlRequest.EXAMPLES)],
    ) -> Response:
        # The statement runs as the caller: the SQL server checks the same credential, shows
        # it its own grants, counts it toward its own limit and audits it under its name.
        answer = await run_in_threadpool(
            state["sql"].run,
            request.sql,
            request.params,
            max_rows=request.max_rows,
            timeout_s=request.timeout_s,
            credential=credentials.credentials,
        )
        http.state.rows = answer.table.num_rows
        if request.format == "csv":
            return Response(answer.csv(), media_type=FORMATS["csv"])
        if request.format == "arrow":
            return Response(answer.arrow(), media_type=FORMATS["arrow"])
        return _Json(answer.json())

    @app.get(
        "/health",
        summary="Cassandra reachable? Boundary, freshness and reconciliation per view",
        description="200 with status ok, or degraded when a pipeline is not ok (a view's "
        "speed-side event time ahead of now, its batch boundary old, or its last "
        "reconciliation found the speed and batch views apart): `pipelines` says each "
        "pipeline's status and `message` names the views, while the others serve; 503 when "
        "Cassandra cannot be read, every pipeline is in error (status error), or not every "
        "worker listens yet (error starting).",
    )
    async def health() -> Response:
        listening, workers = listening_workers() or (1, 1)
        if listening < workers:  # the listening ones would be given every connection (core.workers)
            return _error(503, "starting", f"{listening} of the {workers} workers listen so far.")
        try:
            answer = await state["queries"].health()
        except Exception as exc:  # the driver's NoHostAvailable, timeouts
            return _error(503, "unavailable", f"Cassandra cannot be read: {exc}")
        answer["workers"] = {"listening": listening, "of": workers}
        return _Json(answer, 503 if answer["status"] == "error" else 200)

    @app.get(
        "/metrics",
        summary="Prometheus metrics: both layers' progress and the last reconciliation per "
        "view, the shared caches",
        response_class=Response,
    )
    async def prometheus(_: Annotated[str, Depends(operator)]) -> Response:
        q: Queries = state["queries"]
        pointers = await q.store.pointers()
        metrics.observe({name: p.reconciled for name, p in pointers.views.items()})
        metrics.observe_layers(pointers.views, int(time.time() * 1000))
        metrics.observe_caches({"answers": q.results, "blocks": q.ranking.blocks})
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(_: Analyst) -> Response:
        return _Json(app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(_: Analyst) -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title=f"{app.title} - docs")

    page, script = _static("dashboard.html"), _static("dashboard.js")

    @app.get("/dashboard", summary="The live dashboard page", response_class=HTMLResponse)
    async def dashboard() -> HTMLResponse:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @app.get("/dashboard.js", include_in_schema=False)
    async def dashboard_script() -> Response:
        return Response(script, media_type="text/javascript", headers={"Cache-Control": "no-store"})

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    return app
