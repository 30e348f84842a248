"""The SQL server's side of access: its JVM kept told who may call, and its audit written.

One thread of the server's process, every ``access.refresh_s`` (2 s):

1. re-reads the issued tokens (:class:`access.Directory`) and pushes the
   identity table to the JVM when it changed (:mod:`serving.connect.identities`);
2. with an identity provider configured, reads its JWKS when none was pushed,
   when the last is an hour old, or when a token named a key the JVM lacks (at
   most once a minute), and pushes it with the provider's settings;
3. drains the JVM's audit queue (``guard/Audit.java``): each statement's record,
   its SQL text and error with every literal masked
   (:func:`access.masking.mask_literals`), goes to the audit log and its topic
   (:class:`access.audit.AuditLog`).

A failed step is logged once and tried again at the next turn; the JVM keeps
the last table it was told (services' tokens always in it).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from access.audit import AuditLog, AuditRecord
from access.directory import Directory
from access.identity import Identity
from access.masking import mask_literals
from core.log import get_logger, log_event
from serving.connect.grants import team_grants
from serving.connect.identities import identity_table, oidc_document

if TYPE_CHECKING:
    from core.settings import Settings
    from pipelines import DerivedSpec, PipelineSpec

__all__ = ["SqlAccess", "audit_record"]

_log = get_logger(__name__)
_JWKS_MAX_AGE_S = 3600.0
_JWKS_RETRY_S = 60.0
_DRAIN = 1000


def audit_record(row: dict[str, Any]) -> AuditRecord:
    """The audit record of one statement as the JVM reported it, its literals masked.

    >>> record = audit_record({"identity": "ana", "teams": ["web-analytics"], "source": "token",
    ...     "outcome": "ok", "reason": None, "views": ["events"], "rows": 3, "duration_ms": 12,
    ...     "statement": "SELECT * FROM events WHERE anonymousId = 'a-1'", "at_ms": 1})
    >>> record.statement, record.service, record.action, record.teams
    ('SELECT * FROM events WHERE anonymousId = ?', 'sql', 'statement', ('web-analytics',))
    """
    who = Identity(row["identity"], frozenset(row.get("teams") or ()), row["source"])
    reason, text = row.get("reason"), row.get("statement")
    return AuditRecord.of(
        who,
        "sql",
        "statement",
        outcome=row["outcome"],
        reason=None if reason is None else mask_literals(reason),
        views=tuple(row.get("views") or ()),
        rows=row.get("rows"),
        duration_ms=float(row.get("duration_ms") or 0.0),
        statement=None if text is None else mask_literals(text),
        at_ms=int(row["at_ms"]),
    )


class SqlAccess:
    """The thread that keeps the JVM's identities current and writes its audit."""

    def __init__(
        self,
        settings: Settings,
        jvm: Any,
        pipelines: Sequence[PipelineSpec | DerivedSpec],
        audit: AuditLog | None = None,
    ) -> None:
        self.settings, self.jvm = settings, jvm
        self.directory = Directory(settings)
        self.grants = team_grants(pipelines)
        self.audit = audit if audit is not None else AuditLog(settings)
        self.audited = 0
        self.pushed_at: float | None = None
        self._pushed: str | None = None
        self._jwks_at = 0.0
        self._jwks_tried = 0.0
        self._failing: set[str] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, session: Any) -> SqlAccess:
        """Push the first table now (the server answers nobody before), then every
        ``access.refresh_s``; ``session`` is the Cassandra session the tokens are read on."""
        from access.store import TokenStore

        self.directory.store = TokenStore(session, self.settings.cassandra.keyspace)
        self.turn()
        self._thread = threading.Thread(target=self._run, name="sql-access", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self._step("audit", self.drain)
        self.audit.close()

    def _run(self) -> None:
        while not self._stop.wait(self.settings.access.refresh_s):
            self.turn()

    def turn(self) -> None:
        """One round: tokens, the table, the provider's keys, the audit."""
        self._step("tokens", self.directory.refresh)
        self._step("identities", self.push)
        if self.settings.access.oidc:
            self._step("oidc", self.push_keys)
        self._step("audit", self.drain)

    def _step(self, name: str, step: Any) -> None:
        try:
            step()
        except Exception as error:  # the JVM keeps what it was told; tried again next turn
            if name not in self._failing:
                log_event(_log, "sql.access.failed", level=40, step=name, error=str(error)[:500])
            self._failing.add(name)
        else:
            if name in self._failing:
                log_event(_log, "sql.access.recovered", step=name)
            self._failing.discard(name)

    def push(self) -> bool:
        """The identity table to the JVM, if it changed; whether it was pushed."""
        table = identity_table(self.settings, self.directory.issued.values(), self.grants)
        document = json.dumps(table, sort_keys=True)
        if document == self._pushed:
            return False
        self.jvm.platform.sql.Identities.replace(document)
        self._pushed, self.pushed_at = document, time.time()
        return True

    def push_keys(self) -> bool:
        """The identity provider's JWKS and settings to the JVM, when due; whether pushed."""
        now = time.time()
        stale = now - self._jwks_at > _JWKS_MAX_AGE_S
        unknown = bool(self.jvm.platform.sql.Oidc.unknownKeySeen())
        if not (stale or unknown) or now - self._jwks_tried < _JWKS_RETRY_S:
            return False
        self._jwks_tried = now
        url = str(self.settings.access.oidc_jwks_url)
        with urllib.request.urlopen(url, timeout=10) as answer:  # the settings' URL
            jwks = answer.read().decode()
        self.jvm.platform.sql.Oidc.configure(oidc_document(self.settings.access, jwks))
        self._jwks_at = now
        return True

    def drain(self) -> int:
        """The JVM's audit records to the audit log; how many."""
        count = 0
        while True:
            rows = json.loads(str(self.jvm.platform.sql.Audit.drain(_DRAIN)))
            for row in rows:
                self.audit.record(audit_record(row))
            count += len(rows)
            if len(rows) < _DRAIN:
                break
        self.audited += count
        return count

    def figures(self) -> dict[str, Any]:
        """For ``/health``: the tokens read, when the JVM was last told, the audit's counts."""
        return {
            **self.directory.figures(),
            "identities_pushed_at": self.pushed_at,
            "statements_audited": self.audited,
            "audit_dropped": self.audit.dropped,
            "failing": sorted(self._failing),
        }
