"""The access section of the settings (``WAP_ACCESS__*``): how the services learn who a
request is, and what they keep of what it read.

Part of :class:`core.settings.Settings` (and exported from there).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["AccessSettings"]


class AccessSettings(BaseModel):
    """Identities (issued tokens, an identity provider's tokens), their limits, the audit."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    refresh_s: float = Field(default=2.0, gt=0, le=60)
    """How often the services re-read the issued tokens: an issued token works, and a
    revoked one stops working, within this long, with no restart."""
    oidc_issuer: str | None = None
    """The identity provider's issuer (``iss``), e.g. ``https://login.example.com/``; with
    :attr:`oidc_jwks_url`, its signed tokens (JWT) are accepted as bearer tokens."""
    oidc_audience: str | None = None
    """The audience (``aud``) its tokens must name: the platform's client id there."""
    oidc_jwks_url: str | None = None
    """Where the provider publishes its signing keys (JWKS), read when a key is first
    needed and again when a token names a key not seen yet."""
    oidc_name_claim: str = "preferred_username"
    """The claim naming the analyst (audit rows, metrics by team never show it)."""
    oidc_teams_claim: str = "groups"
    """The claim listing the analyst's teams (a list, or a space-separated string); teams
    not declared in ``pipelines/teams.py`` grant nothing."""
    oidc_algorithms: tuple[str, ...] = ("RS256", "ES256")
    """Signature algorithms accepted (never ``none``, never a shared-secret HS*)."""
    max_statements: int = Field(default=2, ge=1)
    """SQL statements one identity may run at once (Spark Connect and ``/v1/sql``
    together); one more is refused with a clear error, so one analyst cannot take the
    server's slots from the others."""
    audit_retention_days: int = Field(default=90, ge=1)
    """How long audit rows are kept (the ``audit`` table, and its topic)."""

    @model_validator(mode="after")
    def _oidc_whole(self) -> AccessSettings:
        if bool(self.oidc_issuer) != bool(self.oidc_jwks_url):
            raise ValueError(
                "access.oidc_issuer and access.oidc_jwks_url go together "
                "(WAP_ACCESS__OIDC_ISSUER, WAP_ACCESS__OIDC_JWKS_URL): set both or neither."
            )
        if any(a.upper() == "NONE" or a.upper().startswith("HS") for a in self.oidc_algorithms):
            raise ValueError(
                "access.oidc_algorithms accepts public-key signatures only (RS*, ES*, PS*)."
            )
        return self

    @property
    def oidc(self) -> bool:
        return bool(self.oidc_issuer)
