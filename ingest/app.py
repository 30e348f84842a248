"""The collector: Segment's HTTP Tracking API in front of Kafka.

``POST /v1/{track,page,screen,identify,alias,group}`` take one call,
``/v1/batch`` and ``/v1/import`` take ``{"batch": [...]}``. Auth is HTTP
Basic with the source's write key as user (or ``writeKey`` in the body), as
Segment's libraries send it. An answer of 200 means every event of the
request is durable in Kafka: accepted ones in the events topic, rejected ones
(listed in the answer with their reasons) in the dead-letter topic. When
Kafka cannot take them the answer is 503 with ``Retry-After`` and the client
keeps the events. Events of suppressed (forgotten) users are dropped unwritten
and counted (``collector_events_dropped{reason="suppressed"}``); the client
gets the same success as for any accepted event, as Segment answers for them.
A batch refused whole is dead-lettered without their calls.

``GET /metrics`` takes the operators' ``Authorization: Bearer
<settings.monitoring.metrics_token>`` (the local Prometheus sends it);
``GET /health`` answers anyone its status (a load balancer's probe) and
shows its figures (Kafka, queue, workers, suppression list) only with that
token (:func:`core.credentials.health_for`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import os
import time
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from core.credentials import METRICS_TOKEN_HINT, bearer_of, health_for, owner_of
from core.event_time import EventTimeBounds
from core.log import get_logger, log_event
from core.settings import Settings
from core.suppressions import SuppressionList
from core.workers import listening_workers
from ingest.body import BodyRefused, read_body
from ingest.browser import (
    BrowserConventions,
    OriginPolicy,
    add_browser_routes,
    clean_browser_calls,
)
from ingest.enrich import RequestFacts
from ingest.intake import BatchRefusal, Intake
from ingest.metrics import CollectorMetrics
from ingest.producer import EventProducer, KafkaUnavailable, producer_config
from ingest.routes import routes_default, routes_of
from pipelines import PipelineSpec

__all__ = ["BATCH_CALLS", "SINGLE_CALLS", "create_app"]

SINGLE_CALLS = ("track", "page", "screen", "identify", "alias", "group")
BATCH_CALLS = ("batch", "import")
_log = get_logger(__name__)

_EVENT_BODY = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "description": "One Segment call, as its source's pipeline's contract defines it.",
                "additionalProperties": True,
            }
        }
    },
    "required": True,
}
_BATCH_BODY = {
    "content": {
        "application/json": {
            "schema": {
                "type": "object",
                "required": ["batch"],
                "properties": {
                    "batch": {"type": "array", "items": {"type": "object"}},
                    "sentAt": {"type": "string", "format": "date-time"},
                    "context": {"type": "object"},
                },
            }
        }
    },
    "required": True,
}


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    # ``code`` as well as ``error``: Segment's and RudderStack's server libraries read
    # ``payload["code"]`` and ``payload["message"]`` to raise their APIError.
    body = {"success": False, "error": code, "code": code, "message": message}
    return JSONResponse(body, status, headers)


class _Refused(Exception):
    def __init__(self, response: JSONResponse, reason: str | None) -> None:
        self.response = response
        self.reason = reason


def create_app(
    settings: Settings,
    producer: EventProducer | None = None,
    suppressions: SuppressionList | None = None,
    pipelines: tuple[PipelineSpec, ...] | None = None,
) -> FastAPI:
    """Build the collector app; the producer and the suppression list are created at
    start-up unless given. Each source's events go to its pipeline (``pipelines``: the
    declared ones unless given; :mod:`ingest.routes`)."""
    by_source = routes_of(settings, pipelines)
    contract = routes_default(by_source).intake.contract
    sources = settings.collector.source_of()
    metrics = CollectorMetrics()
    for route in by_source.values():  # every pipeline's series from the start, at 0
        metrics.accepted.labels(route.pipeline)
    dlq_topic = settings.kafka.dlq_topic
    limits = settings.collector
    bounds = EventTimeBounds.from_settings(settings)
    origins = OriginPolicy(settings.collector.allowed_origins)
    operators = [("operator", settings.monitoring.metrics_token.get_secret_value().encode())]
    state: dict[str, Any] = {}

    def _operator(request: Request) -> bool:
        return owner_of(bearer_of(request.headers.get("authorization")), operators) is not None

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        state["producer"] = producer or EventProducer(
            producer_config(settings.kafka, settings.collector), limits.delivery_timeout_s
        )
        state["suppressions"] = suppressions or SuppressionList(settings.kafka)
        await _await_suppressions(state["suppressions"], limits.suppressions_wait_s)
        refresh = asyncio.create_task(_observe_every_second(metrics, state))
        log_event(
            _log,
            "collector.started",
            pid=os.getpid(),
            dlq=dlq_topic,
            routes={
                source: [r.pipeline, r.topic, r.intake.contract.ref]
                for source, r in sorted(by_source.items())
            },
        )
        yield
        refresh.cancel()
        if suppressions is None:
            state["suppressions"].close()
        left = state["producer"].close()
        log_event(_log, "collector.stopped", pid=os.getpid(), undelivered=left)

    app = FastAPI(
        title="Web activity collector",
        version=contract.version,
        description=__doc__,
        lifespan=lifespan,
    )

    def _source(request: Request, body: Any) -> str:
        key = None
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            try:
                key = base64.b64decode(header[6:], validate=True).decode().split(":", 1)[0]
            except (binascii.Error, UnicodeDecodeError):
                raise _Refused(
                    _error(401, "unauthorized", "Malformed Basic authorization header."), "auth"
                ) from None
        elif isinstance(body, dict) and isinstance(body.get("writeKey"), str):
            key = body["writeKey"]
        if not key:
            raise _Refused(
                _error(
                    401,
                    "unauthorized",
                    "Send the source's write key as the HTTP Basic user.",
                    **{"WWW-Authenticate": 'Basic realm="collector"'},
                ),
                "auth",
            )
        if key not in sources:
            raise _Refused(_error(401, "unauthorized", "Unknown write key."), "auth")
        return sources[key]

    async def _body(request: Request) -> tuple[bytes, Any]:
        """(the body as received and decoded, its JSON value)."""
        try:  # plain, text/plain or gzip/deflate; the limit applies to the decoded body
            raw = await read_body(request.stream(), request.headers, limits.max_request_bytes)
        except BodyRefused as refused:
            reason = {"unsupported_encoding": "invalid_encoding"}.get(refused.code, refused.code)
            raise _Refused(_error(refused.status, refused.code, refused.message), reason) from None
        try:
            return raw, orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise _Refused(
                _error(400, "invalid_json", f"The body is not valid JSON: {exc}"), "invalid_json"
            ) from None

    async def _handle(request: Request, call_type: str | None, endpoint: str) -> Response:
        received_at = datetime.now(UTC)
        try:
            raw, body = await _body(request)
            source_id = _source(request, body)
            refusal = origins.refusal(request.headers.get("origin"), source_id)
            if refusal is not None:
                raise _Refused(_error(403, "origin_not_allowed", refusal), "origin")
            body = clean_browser_calls(body)
            if call_type is None:
                if not isinstance(body, dict) or not isinstance(body.get("batch"), list):
                    raise _Refused(
                        _error(
                            400,
                            "invalid_batch",
                            'A batch body is a JSON object with a "batch" array of calls.',
                        ),
                        "invalid_batch",
                    )
                events, sent_at = body["batch"], body.get("sentAt")
                garbage = Intake.batch_refusal(events, limits.max_batch_events)
                if garbage is not None:
                    raise _Refused(
                        await _refuse_batch(raw, body, garbage, source_id, received_at),
                        None,  # counted by _refuse_batch
                    )
                batch_context = body.get("context")
                if isinstance(batch_context, dict):
                    events = [_with_context(e, batch_context) for e in events]
            else:
                events, sent_at = [body], None
            response = await _route(
                events, call_type, sent_at, source_id, request, received_at, endpoint
            )
        except _Refused as refused:
            if refused.reason is not None:
                metrics.request_errors.labels(refused.reason).inc()
            response = refused.response
        metrics.requests.labels(endpoint, str(response.status_code)).inc()
        metrics.worker_requests.inc()
        return response

    async def _deliver(records: list[tuple[str, Any]], calls: int) -> JSONResponse | None:
        """Produce and await ``records``; the 503 answer when Kafka did not take them."""
        try:
            await state["producer"].deliver(records)
        except KafkaUnavailable as exc:
            metrics.request_errors.labels("kafka_unavailable").inc()
            log_event(
                _log,
                "collector.kafka_unavailable",
                error=str(exc),
                events=calls,
                records=len(records),
                queued=exc.queued,
            )
            if exc.queued:
                kept = (
                    f"{exc.queued} of the request's {len(records)} records had been handed to "
                    "Kafka and may still be written; a retry is deduplicated on "
                    "(source_id, event_id)"
                )
            else:
                kept = "nothing of this request was kept"
            return _error(
                503,
                "kafka_unavailable",
                f"The event log is unavailable ({exc}); {kept}. Retry later.",
                **{"Retry-After": str(limits.retry_after_s)},
            )
        finally:
            metrics.queue_depth.set(state["producer"].queue_depth)
        return None

    async def _refuse_batch(
        raw: bytes,
        body: dict[str, Any],
        refusal: BatchRefusal,
        source_id: str,
        received_at: datetime,
    ) -> JSONResponse:
        """400 for a batch refused whole, after its one dead letter is in Kafka.

        The calls of suppressed users are dropped from the letter first (and
        counted as dropped), as from any other request: a dead letter would
        keep their data. A batch of theirs only leaves no letter. The answer
        is the same either way, so it does not tell who was forgotten.
        """
        intake = by_source[source_id].intake
        facts = RequestFacts(
            received_at=received_at, source_id=source_id, contract_version=intake.contract.version
        )
        calls = body["batch"]
        suppressed = by_source[source_id].suppressed(state["suppressions"])
        kept = [call for call in calls if not suppressed(call)]
        if len(kept) < len(calls):
            metrics.dropped.labels("suppressed").inc(len(calls) - len(kept))
            body = {**body, "batch": kept}
            raw = _encoded(body)
        if kept:
            letter = intake.batch_letter(raw, len(kept), refusal, facts, body)
            unavailable = await _deliver([(dlq_topic, letter)], len(calls))
            if unavailable is not None:
                return unavailable
            metrics.dead_lettered.inc()
        metrics.request_errors.labels(refusal.code).inc()
        return JSONResponse(
            {
                "success": False,
                "error": refusal.code,
                "message": f"The batch was refused whole: {refusal.detail}",
                "reason": refusal.reason,
                "dead_lettered": True,
            },
            400,
        )

    async def _route(
        events: list[Any],
        call_type: str | None,
        sent_at: Any,
        source_id: str,
        request: Request,
        received_at: datetime,
        endpoint: str,
    ) -> Response:
        route = by_source[source_id]
        facts = RequestFacts(
            received_at=received_at,
            source_id=source_id,
            contract_version=route.intake.contract.version,
            call_type=call_type,
            sent_at=sent_at,
            ip=request.client.host if request.client else None,
            historical=endpoint == "/v1/import",
            bounds=bounds,
        )
        suppressed = route.suppressed(state["suppressions"])
        routed = route.intake.route(events, facts, suppressed=suppressed)
        records = [(route.topic, r) for r in routed.accepted]
        records += [(dlq_topic, r) for r in routed.dead_letters]
        started = time.perf_counter()
        unavailable = await _deliver(records, len(events))
        if unavailable is not None:
            return unavailable
        metrics.produce_latency.observe(time.perf_counter() - started)
        metrics.accepted.labels(route.pipeline).inc(len(routed.accepted))
        metrics.dead_lettered.inc(len(routed.dead_letters))
        metrics.timestamps_clamped.inc(routed.clamped)
        metrics.dropped.labels("suppressed").inc(routed.suppressed)
        for rejection in routed.rejections:
            metrics.rejected.labels(rejection.reason).inc()
        if call_type is not None and routed.rejections:
            rejection = routed.rejections[0]
            return JSONResponse(
                {
                    "success": False,
                    "error": "invalid_event",
                    "message": rejection.detail,
                    "rejected": [rejection.as_dict()],
                    "dead_lettered": True,
                },
                400,
            )
        return JSONResponse(
            {
                "success": True,
                # A suppressed user's events count as accepted: the answer does not tell
                # whoever holds a write key who was forgotten.
                "accepted": len(routed.accepted) + routed.suppressed,
                "rejected": [r.as_dict() for r in routed.rejections],
            }
        )

    routes = [(name, name, f"Send one {name} call", _EVENT_BODY) for name in SINGLE_CALLS]
    routes += [(name, None, f"Send many calls ({name})", _BATCH_BODY) for name in BATCH_CALLS]
    for name, call_type, summary, body in routes:
        app.add_api_route(
            f"/v1/{name}",
            _endpoint(_handle, name, call_type),
            methods=["POST"],
            summary=summary,
            openapi_extra={"requestBody": body},
        )

    @app.get("/health", summary="Kafka reachable, every worker listening? (figures: metrics token)")
    async def health(request: Request) -> JSONResponse:
        # A metadata round trip off the event loop: a slow or absent cluster delays this
        # answer, never the others; a success clears librdkafka's "all brokers down".
        ok = await state["producer"].probe(timeout_s=2.0)
        own = state["suppressions"].status()
        metrics.observe(state["producer"].queue_depth, own)
        service = metrics.figures()  # every worker's, as their gauges say
        # Until every worker listens, the ones that do would be given every connection a
        # load balancer opens (core.workers): not ready yet.
        listening, workers = listening_workers() or (1, 1)
        status = "ok" if listening >= workers else "starting"
        return JSONResponse(
            health_for(
                _operator(request),
                {
                    "status": status if ok else "unavailable",
                    "kafka": "reachable" if ok else "down",
                    "queue_depth": service.queue_depth,
                    "workers": {"listening": listening, "of": workers},
                    "contract": contract.ref,
                    "suppressions": own
                    | {
                        "size": service.suppressions_size,
                        "lag": service.suppressions_lag,
                        "loaded": service.suppressions_loaded,
                    },
                },
            ),
            200 if ok and status == "ok" else 503,
        )

    @app.get(
        "/metrics", summary="Prometheus metrics (metrics token)", response_class=PlainTextResponse
    )
    async def prometheus(request: Request) -> Response:
        if not _operator(request):
            return _error(401, "unauthorized", METRICS_TOKEN_HINT, **{"WWW-Authenticate": "Bearer"})
        metrics.observe(state["producer"].queue_depth, state["suppressions"].status())
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    library_dir = limits.browser_library_dir or settings.local.state_dir / "npm" / "node_modules"
    add_browser_routes(app, settings.collector, library_dir)
    app.add_middleware(BrowserConventions, policy=origins)
    return app


async def _await_suppressions(suppressions: SuppressionList, wait_s: float) -> None:
    """Wait (off the event loop) until the suppression list is loaded, at most ``wait_s``."""
    if await asyncio.to_thread(suppressions.loaded.wait, wait_s):
        return
    log_event(
        _log,
        "collector.suppressions_not_loaded",
        level=logging.WARNING,
        waited_s=wait_s,
        **suppressions.status(),
        why="serving anyway; events of users suppressed but not loaded yet get through until "
        "the list is read (silver drops them; see docs/operations.md, Forgetting a user)",
    )


async def _observe_every_second(metrics: CollectorMetrics, state: dict[str, Any]) -> None:
    """Keep this worker's gauges current, so a scrape another worker answers sums fresh
    values (:mod:`ingest.metrics`)."""
    while True:
        metrics.observe(state["producer"].queue_depth, state["suppressions"].status())
        await asyncio.sleep(1.0)


def _encoded(body: dict[str, Any]) -> bytes:
    """``body`` as JSON text; values orjson refuses (nesting beyond its limit) as ``repr``
    text, and a body too deep for either encoder as its calls' count only."""
    try:
        return orjson.dumps(body)
    except TypeError:
        pass
    try:
        return json.dumps(body, default=repr, ensure_ascii=True).encode()
    except (RecursionError, ValueError):
        return orjson.dumps({"batch": f"<{len(body['batch'])} calls nested too deep>"})


def _with_context(event: Any, batch_context: dict[str, Any]) -> Any:
    if not isinstance(event, dict):
        return event
    context = event.get("context")
    if context is None:
        return {**event, "context": batch_context}
    if isinstance(context, dict):
        return {**event, "context": {**batch_context, **context}}
    return event


def _endpoint(handle, name: str, call_type: str | None):
    """The route function of ``/v1/<name>``; ``call_type`` None means a batch body."""

    async def endpoint(request: Request) -> Response:
        return await handle(request, call_type, f"/v1/{name}")

    endpoint.__name__ = f"post_{name}"
    return endpoint
