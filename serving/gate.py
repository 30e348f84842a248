"""Where a request enters serving: who it is, whether it may read the view it names, and
its audit record.

Every data route asks the :class:`Gate` (the FastAPI routes through their
``analyst`` dependency, the hot path itself): the bearer credential is
identified by the :class:`access.Directory` (401 when it is nobody), and a
view is answered only when the identity's teams may read its pipeline
(:func:`access.readable_views`); any other name, of a view that exists or not,
is refused alike with 403 ``not_granted`` (to an admin, from whom nothing is hidden, a
name that is no view is 400 ``unknown_view``). Each read is then one audit record
(:mod:`access.audit`): who, the route, the view, the outcome and why, the rows
answered and the time taken; never the request's parameters.

>>> from access import Identity
>>> gate = Gate(None, None)  # type: ignore[arg-type]
>>> ana = Identity("ana", frozenset({"shop-data"}), "token")
>>> gate.may_read(ana, "orders_by_currency"), gate.may_read(ana, "clicks")
(True, False)
>>> gate.refusal(ana, "clicks").status, gate.refusal(ana, "nope").status
(403, 403)
>>> admin = Identity("ops", frozenset({"data-platform"}), "service")
>>> gate.refusal(admin, "nope").code
'unknown_view'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from access.audit import AuditRecord
from access.identity import Identity, readable_views
from pipelines.teams import ADMINS
from serving.errors import QueryError

if TYPE_CHECKING:
    from access import Directory
    from access.audit import AuditLog

__all__ = ["AUDITED", "Answer", "Gate"]

AUDITED = frozenset({"/v1/views", "/v1/timeseries", "/v1/top", "/v1/reach", "/v1/sql"})
"""The routes whose every request is an audit record: those that read data."""

_ANONYMOUS = Identity("anonymous", frozenset(), "token")
"""Who a request without a valid credential is, in its audit record."""
_EVERYONE = Identity("admins", frozenset({ADMINS}), "service")
"""Who reads every view: what is hidden from nobody."""


class Answer(dict):
    """A route's answer (serialised as the dict it is) that knows how many rows it holds,
    for the audit record; a series' or a ranking's rows may already be encoded."""

    rows: int | None = None

    @classmethod
    def of(cls, answer: dict[str, Any] | None, rows: int) -> Answer | None:
        if answer is None:
            return None
        made = cls(answer)
        made.rows = rows
        return made


class Gate:
    def __init__(self, directory: Directory, audit: AuditLog | None) -> None:
        self.directory, self.audit = directory, audit
        self._views: dict[frozenset[str], frozenset[str]] = {}
        """Readable views by teams: the declarations do not change while a worker runs."""

    def identify(self, credential: str | None) -> Identity | None:
        return self.directory.identify(credential)

    def views_of(self, identity: Identity) -> frozenset[str]:
        found = self._views.get(identity.teams)
        if found is None:
            found = self._views[identity.teams] = readable_views(identity)
        return found

    def may_read(self, identity: Identity, view: str) -> bool:
        return view in self.views_of(identity)

    def refusal(self, identity: Identity, view: str) -> QueryError:
        """Why ``view`` is not answered: 403 ``not_granted``, naming the views ``identity``
        may read, whether ``view`` exists or not; to an identity that reads every view
        (nothing is hidden from it), 400 ``unknown_view`` for a name that is none."""
        granted = self.views_of(identity)
        known = ", ".join(sorted(granted)) or "none"
        if view not in granted and granted >= self.views_of(_EVERYONE):
            return QueryError("unknown_view", f"No view {view!r}; the views are: {known}.")
        return QueryError(
            "not_granted",
            f"View {view!r} is not granted to {identity.name}; the views it may read: {known}.",
            403,
        )

    def check(self, identity: Identity, view: str) -> None:
        """Raise the refusal (403) unless ``identity`` may read ``view``."""
        if not self.may_read(identity, view):
            raise self.refusal(identity, view)

    def record(
        self,
        path: str,
        status: int,
        seconds: float,
        state: dict[str, Any],
    ) -> AuditRecord | None:
        """The audit record of a request to ``path`` answered ``status``, from what the
        route left in the request's ``state`` (identity, view, rows, why it was refused);
        None for a request that reads no data."""
        if self.audit is None or path not in AUDITED:
            return None
        outcome = "ok" if status < 400 else "failed" if status >= 500 else "refused"
        view = state.get("view")
        record = AuditRecord.of(
            state.get("identity") or _ANONYMOUS,
            "serving",
            path,
            outcome=outcome,
            reason=None if outcome == "ok" else state.get("reason") or f"HTTP {status}",
            views=(view,) if view else tuple(state.get("views", ())),
            rows=state.get("rows"),
            duration_ms=round(seconds * 1000, 3),
        )
        self.audit.record(record)
        return record
