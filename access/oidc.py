"""An identity provider's signed tokens (OIDC access or ID tokens, JWT), checked here.

A token is accepted when its signature verifies against a key the provider
publishes (its JWKS, ``access.oidc_jwks_url``) with an allowed public-key
algorithm, it names the configured issuer and audience, and it has not
expired. The analyst's name and teams are read from the configured claims.
Verified tokens are kept until they expire (by digest), so a dashboard's
requests pay the signature check once.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from access.identity import Identity
from access.tokens import digest_of

if TYPE_CHECKING:
    from core.access_settings import AccessSettings

__all__ = ["OidcVerifier", "identity_of_claims"]

_KEPT = 4096
"""Most verified tokens kept (oldest dropped first)."""


def identity_of_claims(claims: dict[str, Any], name_claim: str, teams_claim: str) -> Identity:
    """The identity a verified token's claims describe.

    >>> identity_of_claims({"sub": "1", "preferred_username": "ana", "groups": ["shop-data"]},
    ...                    "preferred_username", "groups").teams
    frozenset({'shop-data'})
    >>> who = identity_of_claims({"sub": "1", "groups": "a b"}, "email", "groups")
    >>> who.name, sorted(who.teams), who.source
    ('1', ['a', 'b'], 'oidc')
    """
    teams = claims.get(teams_claim) or ()
    if isinstance(teams, str):
        teams = teams.split()
    name = claims.get(name_claim) or claims.get("sub")
    return Identity(str(name), frozenset(str(t) for t in teams), "oidc")


class OidcVerifier:
    def __init__(self, access: AccessSettings) -> None:
        from jwt import PyJWKClient

        self.access = access
        self._keys = PyJWKClient(str(access.oidc_jwks_url), cache_keys=True, lifespan=3600)
        self._verified: dict[str, tuple[float, Identity]] = {}

    def identify(self, text: str) -> Identity | None:
        """Who the signed token ``text`` proves to be; None when it does not verify."""
        import jwt

        key = digest_of(text)
        kept = self._verified.get(key)
        if kept is not None and kept[0] > time.time():
            return kept[1]
        try:
            signing = self._keys.get_signing_key_from_jwt(text)
            claims = jwt.decode(
                text,
                signing.key,
                algorithms=list(self.access.oidc_algorithms),
                audience=self.access.oidc_audience,
                issuer=self.access.oidc_issuer,
                options={"require": ["exp", "iss", "sub"]},
            )
        except (jwt.PyJWTError, ValueError):
            return None
        identity = identity_of_claims(
            claims, self.access.oidc_name_claim, self.access.oidc_teams_claim
        )
        if len(self._verified) >= _KEPT:
            self._verified.pop(next(iter(self._verified)))
        self._verified[key] = (float(claims["exp"]), identity)
        return identity
