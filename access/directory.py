"""Who a bearer credential proves to be: the one place a service asks.

Three kinds of credential, each tried only when the credential has its shape:
an issued token (``wap.<id>.<secret>``, :mod:`access.tokens`; read from the
store every ``access.refresh_s``, so issuing and revoking need no restart), an
identity provider's signed token (three dot-separated parts, when OIDC is set
up: :mod:`access.oidc`), and the services' own tokens from the settings
(``serving.api_tokens``: services of the platform's admins, such as the local
dashboard's). An unknown, expired, revoked or malformed credential is nobody:
the caller answers 401 without saying which.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from access.identity import Identity
from access.store import Issued, TokenStore, lookup
from access.tokens import token_id
from core.credentials import owner_of
from core.log import get_logger, log_event

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = ["Directory", "service_identities"]

_log = get_logger(__name__)


def service_identities(settings: Settings) -> list[tuple[str, bytes]]:
    """``(name, token)`` of the services' tokens in the settings (the admins' team)."""
    return [(n, t.get_secret_value().encode()) for n, t in settings.serving.api_tokens.items()]


class Directory:
    """Resolves credentials to identities; :meth:`refresh` re-reads the issued tokens."""

    def __init__(self, settings: Settings, store: TokenStore | None = None) -> None:
        from access.oidc import OidcVerifier

        self.settings, self.store = settings, store
        self.services = service_identities(settings)
        self.oidc = OidcVerifier(settings.access) if settings.access.oidc else None
        self.issued: dict[str, Issued] = {}
        self.refreshed: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def identify(self, credential: str | None) -> Identity | None:
        if not credential:
            return None
        if token_id(credential) is not None:
            return lookup(self.issued, credential, datetime.now(UTC))
        if self.oidc is not None and credential.count(".") == 2:
            return self.oidc.identify(credential)
        name = owner_of(credential, self.services)
        if name is None:
            return None
        from pipelines.teams import ADMINS

        return Identity(name, frozenset({ADMINS}), "service")

    def refresh(self) -> None:
        """Re-read every issued token (a small table: one row per token ever issued)."""
        if self.store is not None:
            self.issued = {t.id: t for t in self.store.all()}
            self.refreshed = datetime.now(UTC).timestamp()

    def start(self) -> Directory:
        """Read the tokens now, then every ``access.refresh_s`` in a thread of its own (a
        first read that fails leaves no issued token working until one succeeds)."""
        try:
            self.refresh()
        except Exception as error:
            log_event(_log, "access.refresh_failed", level=40, error=str(error)[:500])
        self._thread = threading.Thread(target=self._run, name="access-refresh", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        failing = False
        while not self._stop.wait(self.settings.access.refresh_s):
            try:
                self.refresh()
            except Exception as error:  # the last tokens read stay; said once
                if not failing:
                    log_event(_log, "access.refresh_failed", level=40, error=str(error)[:500])
                failing = True
            else:
                if failing:
                    log_event(_log, "access.refresh_recovered")
                failing = False

    def figures(self) -> dict[str, Any]:
        """For ``/health``: how many tokens are active and when they were last read."""
        now = datetime.now(UTC)
        active = sum(1 for t in self.issued.values() if t.state(now) == "active")
        return {"tokens_active": active, "tokens_read_at": self.refreshed, "oidc": bool(self.oidc)}
