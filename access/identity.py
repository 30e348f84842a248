"""Who a request is, and what that identity may read.

An :class:`Identity` is proved by a credential (:mod:`access.directory`): an
issued token, a service's token from the settings, or an identity provider's
signed token. It carries teams; what it may read follows from the pipelines'
declarations (:meth:`pipelines.PipelineSpec.readable_by`): a pipeline's owner,
its declared readers and the platform's admins read it, nobody else.

>>> from pipelines import pipeline
>>> two = [pipeline("web_events"), pipeline("checkouts")]
>>> web = Identity("ana", frozenset({"web-analytics"}), "token")
>>> [p.name for p in readable_pipelines(web, two)]
['web_events']
>>> sorted(readable_views(web, two))
['clicks', 'page_activity', 'search_terms', 'site_activity']
>>> readable_views(Identity("bo", frozenset(), "token"))
frozenset()
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from pipelines import PipelineSpec

__all__ = ["Identity", "Source", "readable_pipelines", "readable_views"]

Source = Literal["token", "service", "oidc"]
"""How the identity was proved: a token issued with ``platformctl access issue``, a
service's token from the settings, an identity provider's signed token."""


@dataclass(frozen=True)
class Identity:
    name: str
    """The analyst's or service's name, as audit rows and metrics show it."""
    teams: frozenset[str]
    source: Source

    @property
    def admin(self) -> bool:
        """One of the platform's admins (:data:`pipelines.teams.ADMINS`): reads every
        pipeline and the audit log."""
        from pipelines.teams import ADMINS

        return ADMINS in self.teams

    @property
    def label(self) -> str:
        """The teams, as one metric label value (no personal data: teams, not names)."""
        return ",".join(sorted(self.teams)) or "none"


def readable_pipelines(
    identity: Identity, pipelines: Iterable[PipelineSpec] | None = None
) -> tuple[PipelineSpec, ...]:
    """The pipelines ``identity`` may read, of ``pipelines`` (default: every declared one)."""
    if pipelines is None:
        from pipelines import PIPELINES

        pipelines = PIPELINES
    return tuple(p for p in pipelines if p.readable_by(identity.teams))


def readable_views(
    identity: Identity, pipelines: Iterable[PipelineSpec] | None = None
) -> frozenset[str]:
    """The names of the views ``identity`` may read."""
    return frozenset(v for p in readable_pipelines(identity, pipelines) for v in p.views)
