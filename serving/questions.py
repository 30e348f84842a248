"""The data routes' questions: from a request's token and parameters to the query core.

The FastAPI routes (:mod:`serving.app`) and the hot path in front of them
(:mod:`serving.hot`) both go through these functions, so a request is the
same question whichever answers it: the same token check, the same keys and
range, the same call of :class:`serving.query.Queries`. Answers are asked
``encoded`` (the shared part kept as JSON, :mod:`serving.query`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import orjson

from pipelines import collector_pipeline, declared_views
from serving.errors import QueryError
from serving.query import Queries
from serving.timerange import is_relative, parse_instant
from views.kinds import kind

__all__ = [
    "SERVED_VIEWS",
    "WHOLE_SITE",
    "ReachView",
    "keys_of",
    "reach",
    "timeseries",
    "top",
]

SERVED_VIEWS = declared_views()
"""Every declared pipeline's views: what the API serves."""

ReachView = StrEnum(  # type: ignore[misc]
    "ReachView",
    [(s.name, s.name) for s in SERVED_VIEWS if any(kind(m.kind).distinct for m in s.measures)],
)
"""The views /v1/reach can answer: those with a distinct-count (hll) measure."""


def _whole_site() -> ReachView:
    """The collector's default pipeline's view keyed by a constant (the site), else the first
    such view: not whichever module sorts first (a pipeline added later with a constant-keyed
    view took /v1/reach over)."""
    reach = [s for s in SERVED_VIEWS if s.name in set(ReachView) and s.constant_key]
    default = {s.name for s in collector_pipeline().view_specs}
    return ReachView(next((s.name for s in reach if s.name in default), reach[0].name))


WHOLE_SITE = _whole_site()
"""What /v1/reach answers when no view is named: the view keyed by a constant (the site)."""


def keys_of(view: str, raw: Sequence[str]) -> list[tuple[str, ...]]:
    """The keys of ``view`` a request names: values of a one-column key as they are, of a
    wider key as JSON arrays; a view keyed by a constant needs none."""
    spec = next((s for s in SERVED_VIEWS if s.name == view), None)
    if spec is None:
        return [(k,) for k in raw]  # the query core names the unknown view
    if not raw and spec.constant_key is not None:
        return [spec.constant_key]
    if len(spec.keys) == 1:
        return [(k,) for k in raw]
    keys = []
    for text in raw:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, list):
            raise QueryError(
                "invalid_key",
                f"View {view!r} is keyed by {list(spec.keys)}: pass each key as a JSON array.",
            )
        keys.append(tuple(value))
    return keys


def _range(q: Queries, start: str, end: str) -> tuple[int, int, tuple[str, str] | None]:
    """``(lo, hi, moving)``: the range in epoch ms, and ``(start, end)`` as asked when
    either is relative to now (the range moves with the clock)."""
    now = q.now_ms()
    moving = (start, end) if is_relative(start) or is_relative(end) else None
    return (
        parse_instant(start, now_ms=now, name="start"),
        parse_instant(end, now_ms=now, name="end"),
        moving,
    )


async def timeseries(
    q: Queries,
    view: str,
    key: Sequence[str],
    start: str,
    end: str,
    granularity: str,
    quantile: Sequence[float],
    measure: Sequence[str],
    cached_only: bool = False,
) -> dict[str, Any] | None:
    """``GET /v1/timeseries``; None when ``cached_only`` and the answer is not kept."""
    lo, hi, moving = _range(q, start, end)
    keys = keys_of(view, key)
    return await q.timeseries(
        view,
        keys,
        lo,
        hi,
        granularity,
        quantile,
        measure,
        encoded=True,
        cached_only=cached_only,
        moving=moving,
    )


async def top(
    q: Queries,
    view: str,
    measure: str,
    start: str,
    end: str,
    n: int,
    quantile: float,
    min_samples: int,
    cached_only: bool = False,
) -> dict[str, Any] | None:
    """``GET /v1/top``; None when ``cached_only`` and the answer is not kept."""
    lo, hi, moving = _range(q, start, end)
    return await q.top(
        view,
        measure,
        lo,
        hi,
        n,
        quantile,
        min_samples,
        encoded=True,
        cached_only=cached_only,
        moving=moving,
    )


async def reach(
    q: Queries, view: str, key: str | None, start: str, end: str, cached_only: bool = False
) -> dict[str, Any] | None:
    """``GET /v1/reach``; None when ``cached_only`` and the answer is not kept."""
    lo, hi, moving = _range(q, start, end)
    keys = keys_of(view, [] if key is None else [key])
    if not keys:
        raise QueryError("missing_key", "Name the page: key=<path>.")
    return await q.reach(view, keys[0], lo, hi, cached_only=cached_only, moving=moving)
