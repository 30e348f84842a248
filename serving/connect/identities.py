"""Who may call the SQL server, as its JVM learns it from this process.

The guard (``guard/Identities.java``) identifies every Spark Connect call by its
bearer credential, but it reads neither Cassandra nor the settings: this process
tells it, through py4j, a table of the credentials it accepts, as SHA-256 digests
(the JVM never holds a token):

- the issued tokens still active (``access_tokens``, re-read by the
  :class:`access.Directory` every ``access.refresh_s``): name, teams, expiry;
- the services' tokens (``serving.api_tokens``) and the server's own
  ``sql.token``, as services of the admins' team (``sql-service``: the health
  query and existing clients of the one shared token; ``POST /v1/sql`` sends its
  caller's own credential);
- each declared team's grants (:func:`serving.connect.grants.team_grants`).

The table is pushed whole whenever it changes, so a revoked token is refused,
and a new one served, within ``access.refresh_s`` (2 s) with no restart. With
an identity provider configured, its JWKS (read here) goes along with its
settings (:func:`oidc_document`): the JVM checks the signed tokens itself.

>>> from core.settings import Settings
>>> table = identity_table(Settings(), [], {"marketing": ["gold_clicks"]})
>>> sorted(who["name"] for who in table["identities"])
['local-analyst', 'sql-service']
>>> {who["source"] for who in table["identities"]}, table["identities"][0]["teams"]
({'service'}, ['data-platform'])
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from access.directory import service_identities
from access.tokens import digest_of

if TYPE_CHECKING:
    from access.store import Issued
    from core.access_settings import AccessSettings
    from core.settings import Settings

__all__ = ["SQL_SERVICE", "identity_table", "oidc_document"]

SQL_SERVICE = "sql-service"
"""The identity of ``sql.token``: the server's own health query and the serving API's
``POST /v1/sql`` (a service of the admins' team)."""


def identity_table(
    settings: Settings,
    issued: Iterable[Issued],
    grants: Mapping[str, list[str]],
    now: datetime | None = None,
) -> dict[str, Any]:
    """The document ``Identities.replace`` reads: the accepted credentials' digests, with
    name, teams, source and expiry (ms since the epoch, 0: none), and the teams' grants."""
    from pipelines.teams import ADMINS

    now = now or datetime.now(UTC)
    rows: dict[str, dict[str, Any]] = {}
    for token in issued:
        if token.state(now) != "active":
            continue
        expires = token.expires_at
        rows[token.digest] = {
            "name": token.name,
            "teams": sorted(token.teams),
            "source": "token",
            "expires_ms": 0 if expires is None else int(expires.timestamp() * 1000),
        }
    services = [*service_identities(settings), (SQL_SERVICE, _secret(settings))]
    for name, secret in services:
        rows[digest_of(secret.decode())] = {
            "name": name,
            "teams": [ADMINS],
            "source": "service",
            "expires_ms": 0,
        }
    return {
        "identities": [{"digest": digest} | row for digest, row in sorted(rows.items())],
        "grants": {team: list(views) for team, views in sorted(grants.items())},
    }


def _secret(settings: Settings) -> bytes:
    return settings.sql.token.get_secret_value().encode()


def oidc_document(access: AccessSettings, jwks: str) -> str:
    """What ``Oidc.configure`` reads: the provider's settings and its keys (``jwks``, the
    JWKS document as the provider publishes it).

    >>> from core.access_settings import AccessSettings
    >>> access = AccessSettings(oidc_issuer="https://id.example/", oidc_jwks_url="https://id.example/k")
    >>> json.loads(oidc_document(access, '{"keys": []}'))["algorithms"]
    ['RS256', 'ES256']
    """
    json.loads(jwks)  # a document the provider sent whole, or an error here
    return json.dumps(
        {
            "issuer": access.oidc_issuer,
            "audience": access.oidc_audience,
            "name_claim": access.oidc_name_claim,
            "teams_claim": access.oidc_teams_claim,
            "algorithms": list(access.oidc_algorithms),
            "jwks": jwks,
        }
    )
