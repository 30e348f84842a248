"""The views section of the settings (``WAP_VIEWS__*``): how both layers prepare the views' input.

Part of :class:`core.settings.Settings`, kept in a module of its own. Its one
secret, ``identity_key``, keys the digest that replaces every personal id in
the views' input (:mod:`views.digest`). The speed job and the batch steps
need it, and must hold the same one; the SQL server, serving and the
collector never use it (``platformctl`` starts the SQL server without it).

>>> ViewSettings().identity_key_for("local").get_secret_value()[:9]
'local-dev'
>>> ViewSettings().identity_key_for("prod")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: environment=prod still uses the local development views.identity_key; ...
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator

__all__ = ["LOCAL_IDENTITY_KEY", "MIN_KEY_CHARS", "ViewSettings"]

LOCAL_IDENTITY_KEY = "local-dev-identity-key-for-this-machine-only"
"""The local default of ``views.identity_key``: for this machine only."""
MIN_KEY_CHARS = 32
"""The shortest ``identity_key`` accepted: a guessed key would let anyone digest candidates."""


class ViewSettings(BaseModel):
    """How the speed and batch layers prepare the views' input, the same in both."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    identity_key: SecretStr = SecretStr(LOCAL_IDENTITY_KEY)
    """Key of the HMAC-SHA256 that replaces each personal id (a pipeline's ``identity``
    fields) in the views' input, so that distinct-count sketches hold digests and no
    candidate id can be tested against them (docs/sql.md). At least 32 characters
    (``openssl rand -hex 32``); the speed job and every batch step must have the same one.
    Keep it secret and stable: a new key needs every sketch rebuilt (docs/operations.md).
    The local default is for this machine only: outside ``environment=local`` the layers
    refuse to build views with it."""

    @field_validator("identity_key")
    @classmethod
    def _long_enough(cls, value: SecretStr) -> SecretStr:
        length = len(value.get_secret_value())
        if length < MIN_KEY_CHARS:
            raise ValueError(
                f"views.identity_key (WAP_VIEWS__IDENTITY_KEY) has {length} characters; use "
                f"at least {MIN_KEY_CHARS} random ones (`openssl rand -hex 32`)."
            )
        return value

    def identity_key_for(self, environment: str) -> SecretStr:
        """``identity_key``, once it is not the local default outside ``environment=local``
        (a ``ValueError`` naming the fix otherwise)."""
        if environment != "local" and self.identity_key.get_secret_value() == LOCAL_IDENTITY_KEY:
            raise ValueError(
                f"environment={environment} still uses the local development "
                "views.identity_key; set WAP_VIEWS__IDENTITY_KEY (`openssl rand -hex 32`) to "
                "the same secret for the speed job and the batch steps."
            )
        return self.identity_key
