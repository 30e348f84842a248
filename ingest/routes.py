"""Where the collector writes each source's events: the pipeline its declaration names.

A write key authenticates a source (``collector.write_keys``: source id -> key); the
source's pipeline (:func:`pipelines.collector_routes`: the one naming it in
``Collector(sources=...)``, else the collector's default pipeline) gives the contract its
events are validated against and the topic they are written to. Every source must go
somewhere: the collector refuses to start otherwise, naming the sources and the fix.

>>> from core.settings import Settings
>>> website = routes_of(Settings())["local-website"]
>>> website.pipeline, website.topic, website.identity
('web_events', 'web.events.v1', ('userId', 'anonymousId'))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from core.settings import Settings
from ingest.intake import Intake
from pipelines import Collector, PipelineSpec, collector_routes

if TYPE_CHECKING:
    from core.suppressions import SuppressionList

__all__ = ["Route", "routes_default", "routes_of"]


@dataclass(frozen=True)
class Route:
    """One source's destination: its pipeline, that pipeline's topic and intake."""

    pipeline: str
    topic: str
    intake: Intake
    default: bool
    """Whether the pipeline is the collector's default (it names no source)."""
    identity: tuple[str, ...] = ()
    """The fields that name a person in its events (its ``PipelineSpec.identity``): what the
    suppression list is checked on."""

    def suppressed(self, suppressions: SuppressionList) -> Callable[[Any], bool]:
        """Whether an event of this route is of a person forgotten in its pipeline."""
        return partial(suppressions.suppresses, pipeline=self.pipeline, fields=self.identity)


def routes_of(
    settings: Settings, pipelines: tuple[PipelineSpec, ...] | None = None
) -> dict[str, Route]:
    """Source id -> :class:`Route` for every source of ``collector.write_keys`` (one intake
    per pipeline, shared by its sources)."""
    by_pipeline: dict[str, Route] = {}
    routes = {}
    for source, spec in collector_routes(settings.collector.write_keys, pipelines).items():
        if spec.name not in by_pipeline:
            by_pipeline[spec.name] = Route(
                spec.name,
                spec.topic_of(settings),
                Intake.of_pipeline(spec, settings.collector),
                isinstance(spec.arrival, Collector) and spec.arrival.default,
                spec.identity,
            )
        routes[source] = by_pipeline[spec.name]
    return routes


def routes_default(routes: dict[str, Route]) -> Route:
    """The route of the collector's default pipeline when a source goes there, else the
    first: whose contract the collector's ``/health`` and API version name."""
    return next((r for r in routes.values() if r.default), next(iter(routes.values())))
