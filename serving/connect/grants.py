"""What each team sees of the SQL server's catalog: the views of the pipelines it may read.

Every view the catalog makes belongs to one pipeline (:func:`catalog.pipeline_views`:
``gold_``, ``speed_`` and ``serving_`` of each of its views, its events; a derived
pipeline's table), to
everyone who reads some pipeline (:data:`SHARED`: ``serving_boundaries``, the
boundaries' times, no rows of any view), or to the platform's admins only
(:data:`ADMIN_ONLY`: ``audit_log``). A team is granted the views of the pipelines
whose declaration lets it read them (:meth:`pipelines.PipelineSpec.readable_by`:
owner, readers, admins). An identity sees the union of its teams' grants; one of
no declared team, or of teams granted nothing, sees an empty catalog.

The guard (``guard/Grants.java``) reads this table as the host pushes it
(:mod:`serving.connect.identities`): SHOW VIEWS lists the granted views, and any
other name is refused before Spark resolves it.

>>> grants = team_grants()
>>> "gold_clicks" in grants["marketing"], "gold_orders_by_currency" in grants["marketing"]
(True, False)
>>> "checkouts_events" in grants["shop-data"], "events" in grants["shop-data"]
(True, False)
>>> "audit_log" in grants["data-platform"], "audit_log" in grants["web-analytics"]
(True, False)
>>> "web_sessions" in grants["marketing"], "web_sessions" in grants["shop-data"]
(True, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from serving.connect.catalog import pipeline_views

if TYPE_CHECKING:
    from pipelines import DerivedSpec, PipelineSpec
    from pipelines.teams import Team

__all__ = ["ADMIN_ONLY", "SHARED", "team_grants", "view_owners"]

SHARED = ("serving_boundaries",)
"""Views of every identity that reads at least one pipeline."""
ADMIN_ONLY = ("audit_log",)
"""Views of the platform's admins only."""


def view_owners(
    pipelines: Iterable[PipelineSpec | DerivedSpec] | None = None,
) -> dict[str, str | None]:
    """Every view the catalog makes -> the pipeline it reads (None: shared or the admins').

    >>> owners = view_owners()
    >>> owners["events"], owners["serving_orders_by_currency"], owners["audit_log"]
    ('web_events', 'checkouts', None)
    """
    owners: dict[str, str | None] = dict.fromkeys((*SHARED, *ADMIN_ONLY))
    for pipeline in _pipelines(pipelines):
        owners |= dict.fromkeys(pipeline_views(pipeline), pipeline.name)
    return owners


def team_grants(
    pipelines: Iterable[PipelineSpec | DerivedSpec] | None = None,
    teams: Iterable[Team] | None = None,
) -> dict[str, list[str]]:
    """Declared team -> the catalog views it is granted (sorted)."""
    from pipelines.teams import ADMINS, TEAMS

    declared = _pipelines(pipelines)
    grants: dict[str, list[str]] = {}
    for team in TEAMS if teams is None else teams:
        readable = [p for p in declared if p.readable_by(frozenset({team.name}))]
        views = {view for p in readable for view in pipeline_views(p)}
        if readable:
            views |= set(SHARED)
        if team.name == ADMINS:
            views |= set(ADMIN_ONLY)
        grants[team.name] = sorted(views)
    return grants


def _pipelines(
    pipelines: Iterable[PipelineSpec | DerivedSpec] | None,
) -> tuple[PipelineSpec | DerivedSpec, ...]:
    if pipelines is None:
        from pipelines import DERIVED, PIPELINES

        return (*PIPELINES, *DERIVED)
    return tuple(pipelines)
