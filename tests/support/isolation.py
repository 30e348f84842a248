"""Another pipeline as its users see it, captured before one pipeline fails and compared after.

DESIGN.md decision 19: one pipeline's failure, replay, forget or mis-declaration never stops
another's live answers, SQL views, health or batch boundary. A test captures :func:`seen` of
the other pipeline before it breaks the first, and asserts after that nothing of it changed
(:meth:`Seen.changes`): the speed rows of the version serving reads (values, not which
micro-batch wrote them), the speed version pointers, the speed runs, the published batch
boundaries, and, given a serving app, serving's ``/health`` verdict for the pipeline and its
top-N answers over a fixed range (with the boundary, speed version, freshness status and
unavailable windows each answer states).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from core.settings import ServingSettings, Settings
from tests.support.ports import free_port
from tests.support.serving import served

if TYPE_CHECKING:
    from pipelines import PipelineSpec

__all__ = ["TOKEN", "Seen", "publish_boundary", "seen", "serving_api", "with_own_serving"]

TOKEN = "isolation-test-token-0001"
"""The analyst token of the serving app :func:`with_own_serving` configures."""


@dataclass(frozen=True)
class Seen:
    """What one pipeline's users see (:func:`seen`); equal when nothing of it changed."""

    pipeline: str
    speed_rows: Mapping[str, frozenset[tuple] | str]
    """Per view, its speed rows (``window_start``, keys, measures) in the version serving
    reads (why not, when they cannot be read)."""
    speed_versions: Mapping[str, int]
    runs: tuple
    """The pipeline's speed runs (``speed_runs``), newest first."""
    boundaries: Mapping[str, Any]
    """Per view, its published batch boundary (:class:`layout.Boundary`, or None)."""
    health: Mapping[str, Any] | None
    """Serving's ``/health`` verdict for the pipeline (None: no serving app asked)."""
    answers: Mapping[str, Any] | None
    """Per view and measure, serving's top-N answer over the range asked (None: none)."""

    @property
    def fresh(self) -> bool:
        """Serving's answers say every view is fresh (its speed layer recorded its progress:
        rows are written before it, so a capture taken earlier may see it come later)."""
        statuses = [m["freshness"] for v in (self.answers or {}).values() for m in v.values()]
        return bool(statuses) and set(statuses) == {"ok"}

    def changes(self, after: Seen) -> dict[str, tuple[Any, Any]]:
        """What differs in ``after``, by part (``answers.<view>.<measure>``, ``runs`` ...):
        (before, after); empty when nothing does.

        >>> a = Seen("p", {"v": frozenset()}, {"v": 0}, (), {"v": None}, None, None)
        >>> a.changes(a)
        {}
        >>> a.changes(Seen("p", {"v": frozenset()}, {"v": 1}, (), {"v": None}, None, None))
        {'speed_versions.v': (0, 1)}
        """
        out = {}
        for part in ("speed_rows", "speed_versions", "runs", "boundaries", "health", "answers"):
            out |= _changes(part, getattr(self, part), getattr(after, part))
        return out


def _changes(where: str, before: Any, after: Any) -> dict[str, tuple[Any, Any]]:
    if before == after:
        return {}
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        out = {}
        for key in dict.fromkeys([*before, *after]):
            out |= _changes(f"{where}.{key}", before.get(key), after.get(key))
        return out
    return {where: (before, after)}


def seen(
    session: Any,
    settings: Settings,
    spec: PipelineSpec,
    *,
    api: httpx.Client | None = None,
    span: tuple[datetime, datetime] | None = None,
) -> Seen:
    """What ``spec``'s users see now, read from ``settings``' keyspace and, with ``api``, asked
    of serving over the windows of ``span`` (a fixed range: an answer relative to now moves)."""
    from cassandra import InvalidRequest

    from layout import ViewTables, read_boundaries, read_speed_versions
    from speed_layer.start import read_runs

    keyspace = settings.cassandra.keyspace
    views = spec.view_specs
    versions = read_speed_versions(session, keyspace, [v.name for v in views])
    rows = {}
    for view in views:
        tables = ViewTables(view, keyspace, "speed", table_version=versions[view.name])
        try:
            found = session.execute(f"SELECT {', '.join(view.columns)} FROM {tables.by_key}")
        except InvalidRequest as error:  # a pointer at a version with no tables
            rows[view.name] = f"unreadable: {error}"
            continue
        rows[view.name] = frozenset(tuple(_plain(v) for v in row) for row in found)
    health = answers = None
    if api is not None:
        assert span is not None, "serving's answers are asked over a fixed span"
        answer = api.get("/health")
        assert answer.status_code in (200, 503), answer.text
        health = answer.json()["pipelines"][spec.name]
        answers = {view.name: _answers(api, view, span) for view in views}
    return Seen(
        pipeline=spec.name,
        speed_rows=rows,
        speed_versions=versions,
        runs=tuple(read_runs(session, spec.stream_settings(settings))),
        boundaries=read_boundaries(settings.cassandra, [v.name for v in views], session=session),
        health=health,
        answers=answers,
    )


def _plain(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray | memoryview) else value


def _answers(api: httpx.Client, view: Any, span: tuple[datetime, datetime]) -> dict[str, Any]:
    """Serving's top keys of every measure of ``view`` over ``span``, with what each answer
    says of the boundary, the speed version, freshness and unavailable windows."""
    out = {}
    start, end = (at.astimezone(UTC).isoformat() for at in span)
    for measure in view.measures:
        params = {"view": view.name, "measure": measure.name, "start": start, "end": end}
        answer = api.get("/v1/top", params=params | {"n": 100})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        out[measure.name] = {
            "items": body["items"],
            "final": body["final"],
            "boundary": body["boundary"][view.name],
            "speed_version": body["speed_version"][view.name],
            "freshness": body["freshness"][view.name]["status"],
            "unavailable": body["unavailable"],
        }
    return out


def with_own_serving(settings: Settings) -> Settings:
    """``settings`` with a serving app of the test's own: a free port, :data:`TOKEN`, one
    worker, pointers read again for every request and no answer kept (an answer asked after
    a failure is computed again, not the one kept from before it)."""
    serving = ServingSettings(
        port=free_port(),
        api_tokens={"tester": TOKEN},
        pointer_cache_s=0.0,
        workers=1,
        result_cache_entries=0,
    )
    return settings.model_copy(update={"serving": serving})


@contextmanager
def serving_api(settings: Settings) -> Iterator[httpx.Client]:
    """The serving app of ``settings`` (:func:`with_own_serving`) on real HTTP in this
    process, and a client carrying its token, until the block ends."""
    with (
        served(settings) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as api,
    ):
        yield api


def publish_boundary(session: Any, settings: Settings, view: str, at: datetime) -> None:
    """Move ``view``'s batch boundary to ``at`` as the batch layer's publish does (its last
    statement), for a test where no batch layer runs: no batch day is published before it."""
    from layout import PointerTables

    insert = session.prepare(PointerTables(settings.cassandra.keyspace).insert_boundary)
    session.execute(insert, (view, at, 1, "isolation-test", datetime.now(UTC)))
