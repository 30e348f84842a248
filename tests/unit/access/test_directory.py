"""Who a credential is: issued tokens (by digest), the services' tokens, nobody else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pydantic import SecretStr

from access.directory import Directory
from access.identity import Identity, readable_views
from access.store import Issued
from access.tokens import new_token
from core.settings import ServingSettings, Settings
from pipelines import PIPELINES, pipeline

NOW = datetime.now(UTC)


class _Store:
    """The issued tokens as the table would hold them (the store's reads are integration's)."""

    def __init__(self, *issued: Issued) -> None:
        self.issued = list(issued)

    def all(self) -> list[Issued]:
        return list(self.issued)


def _issued(name: str, teams: set[str], **times) -> tuple[str, Issued]:
    token = new_token()
    fields = {"issued_at": NOW, "expires_at": None, "revoked_at": None} | times
    return token.text, Issued(token.id, token.digest, name, frozenset(teams), **fields)


def _directory(*issued: Issued) -> Directory:
    settings = Settings(
        serving=ServingSettings(api_tokens={"dashboards": SecretStr("a-service-token-16")})
    )
    directory = Directory(settings, _Store(*issued))  # type: ignore[arg-type]
    directory.refresh()
    return directory


def test_an_issued_token_proves_its_holder_and_teams():
    text, issued = _issued("ana", {"web-analytics"})
    found = _directory(issued).identify(text)
    assert found == Identity("ana", frozenset({"web-analytics"}), "token")
    web = {v for p in PIPELINES if "web-analytics" in (p.owner, *p.readers) for v in p.views}
    assert readable_views(found) == web
    assert web >= set(pipeline("web_events").views)
    assert not web & set(pipeline("checkouts").views)


def test_a_revoked_an_expired_a_forged_or_an_unknown_token_is_nobody():
    text, issued = _issued("ana", {"web-analytics"})
    revoked_text, revoked = _issued("bo", {"shop-data"}, revoked_at=NOW)
    expired_text, expired = _issued("cy", {"shop-data"}, expires_at=NOW - timedelta(seconds=1))
    directory = _directory(issued, revoked, expired)
    forged = text[:-4] + ("AAAA" if not text.endswith("AAAA") else "BBBB")  # same id, new secret
    for credential in (revoked_text, expired_text, forged, new_token().text, "", None, "x"):
        assert directory.identify(credential) is None, credential


def test_a_token_issued_or_revoked_counts_at_the_next_refresh():
    text, issued = _issued("ana", {"web-analytics"})
    store = _Store()
    directory = Directory(Settings(), store)  # type: ignore[arg-type]
    directory.refresh()
    assert directory.identify(text) is None
    store.issued.append(issued)
    directory.refresh()
    assert directory.identify(text) is not None
    store.issued[0] = Issued(**{**issued.__dict__, "revoked_at": NOW})
    directory.refresh()
    assert directory.identify(text) is None


def test_a_service_token_of_the_settings_is_an_admin_service():
    found = _directory().identify("a-service-token-16")
    assert found is not None and found.source == "service" and found.admin
    assert found.name == "dashboards"
