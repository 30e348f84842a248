"""The company's teams, as the platform knows them: who owns a pipeline and who reads it.

Declared here and reviewed as code, like the pipelines. A pipeline names its owner
team and its ``readers`` (:class:`~pipelines.spec.PipelineSpec`); an identity (an
issued token, or an identity provider's token) carries teams. A name that is not
declared here is refused when the declarations are imported, and at ``platformctl
access issue``.

>>> ADMINS in team_names()
True
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ADMINS", "TEAMS", "Team", "team_names"]


@dataclass(frozen=True)
class Team:
    name: str
    """As tokens, identity providers' claims and declarations name it."""
    description: str


ADMINS = "data-platform"
"""The team that runs the platform: it reads every pipeline and the audit log."""

TEAMS: tuple[Team, ...] = (
    Team(ADMINS, "Runs the platform: every pipeline, the audit log, the operators' tools."),
    Team("web-analytics", "Owns the website's activity."),
    Team("shop-data", "Owns the shop's orders, with revenue and buyers."),
    Team("marketing", "Reads the website's traffic for campaigns."),
)


def team_names() -> frozenset[str]:
    return frozenset(team.name for team in TEAMS)
