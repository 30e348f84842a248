"""The platform's own secrets: how long a configured one must be, and how a presented one
is checked.

Each secret a service of the platform checks, or presents to another, is a
setting (:data:`SECRET_SETTINGS`); each is refused when the settings are
loaded if it is shorter than :data:`MIN_SECRET_CHARS` (an empty one too), by
the field validators :func:`long_enough` and :func:`each_long_enough`, with
an error naming the setting and how to make one. Credentials of systems the
platform does not run (Kafka's SASL password, Cassandra's) follow their
owners' rules and are not checked here.

A presented credential is compared in constant time with every configured
one (:func:`owner_of`); an empty one is nobody's, whatever is configured.

The operators' endpoints take ``monitoring.metrics_token``: ``/metrics`` is
refused without it (401, :data:`METRICS_TOKEN_HINT`), ``/health`` answers
everyone its status code and ``status`` and shows its figures only with it
(:func:`health_for`).

>>> from pydantic import SecretStr
>>> owner_of("a-token-of-sixteen", [("ana", b"a-token-of-sixteen")])
'ana'
>>> owner_of("", [("nobody", b"")]) is None
True
>>> bearer_of("Bearer a-token-of-sixteen"), bearer_of("Bearer "), bearer_of("Basic eDo=")
('a-token-of-sixteen', None, None)
>>> long_enough("batch.step_server_token", SecretStr("short"))
Traceback (most recent call last):
...
ValueError: batch.step_server_token (WAP_BATCH__STEP_SERVER_TOKEN) has 5 characters; ...
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

if TYPE_CHECKING:
    from core.settings import Settings

__all__ = [
    "METRICS_TOKEN_HINT",
    "MIN_SECRET_CHARS",
    "SECRET_SETTINGS",
    "bearer_of",
    "each_long_enough",
    "health_for",
    "long_enough",
    "owner_of",
    "refuse_dev_secrets",
]

MIN_SECRET_CHARS = 16
"""The shortest secret a setting may hold (every local default is longer)."""

METRICS_TOKEN_HINT = (
    "Send the metrics token: Authorization: Bearer <token> (settings.monitoring.metrics_token, "
    "WAP_MONITORING__METRICS_TOKEN)."
)
"""What a refused ``/metrics`` answers (the collector's, the step server's, serving's)."""

SECRET_SETTINGS = (
    "collector.write_keys",
    "serving.api_tokens",
    "sql.token",
    "batch.step_server_token",
    "batch.subject_key",
    "monitoring.metrics_token",
    "spark.auth_secret",
    "airflow.admin_password",
)
"""Every secret setting of the platform's own services, each checked by :func:`long_enough`
or :func:`each_long_enough` in its section (``collector.hash_key`` asks for 32)."""


def _variable(setting: str) -> str:
    return "WAP_" + setting.upper().replace(".", "__")


def long_enough(setting: str, value: SecretStr, entry: str | None = None) -> SecretStr:
    """``value`` when it has :data:`MIN_SECRET_CHARS` characters or more; else a
    :class:`ValueError` naming ``setting`` (``section.field``; ``entry``: the name of the
    secret in a map of them) and the fix."""
    length = len(value.get_secret_value())
    if length < MIN_SECRET_CHARS:
        which = setting if entry is None else f"{setting}[{entry!r}]"
        raise ValueError(
            f"{which} ({_variable(setting)}) has {length} characters; a secret needs at "
            f"least {MIN_SECRET_CHARS}: set it to a random one, e.g. `openssl rand -hex 32`."
        )
    return value


def each_long_enough(setting: str, values: Mapping[str, SecretStr]) -> Mapping[str, SecretStr]:
    """``values`` (name -> secret) when each is :func:`long_enough`; the error names the entry."""
    for name, value in values.items():
        long_enough(setting, value, name)
    return values


def bearer_of(header: str | None) -> str | None:
    """The credential of an ``Authorization: Bearer <credential>`` header; None for any other
    scheme, no header or an empty credential."""
    scheme, _, given = (header or "").partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


def owner_of(given: str | None, tokens: Iterable[tuple[str, bytes]]) -> str | None:
    """The name whose token ``given`` is, compared with every token in constant time; None for
    an unknown, empty or missing credential (and never a match with an empty token)."""
    if not given:
        return None
    presented = given.encode()
    found = None
    for name, token in tokens:
        if token and hmac.compare_digest(presented, token):
            found = name
    return found


def health_for(operator: bool, answer: dict[str, Any]) -> dict[str, Any]:
    """What ``/health`` shows: ``answer`` whole to an operator (the metrics token), else its
    ``status`` alone (a load balancer's probe sends no token; the status code is the same)."""
    return answer if operator else {"status": answer["status"]}


def refuse_dev_secrets(settings: Settings) -> None:
    """Raise :class:`ValueError` when a deployment other than ``local`` keeps a local
    development secret (or lets any website send with a source's write key)."""
    environment = settings.environment
    if environment == "local":
        return
    collector, serving = settings.collector, settings.serving
    if set(collector.source_of()) & set(type(collector)().source_of()):
        raise ValueError(
            f"environment={environment} still uses the local development write key; "
            'set WAP_COLLECTOR__WRITE_KEYS=\'{"<source>": "<secret>"}\'.'
        )
    wildcard = sorted(s for s, o in collector.allowed_origins.items() if "*" in o)
    if wildcard and not collector.allow_any_origin:
        raise ValueError(
            f"environment={environment}: sources {wildcard} allow any origin ('*'); "
            "list their sites' origins in WAP_COLLECTOR__ALLOWED_ORIGINS='{\"<source>\": "
            '["https://<site>"]}\', or set WAP_COLLECTOR__ALLOW_ANY_ORIGIN=true.'
        )
    dev_tokens = {t.get_secret_value() for t in type(serving)().api_tokens.values()}
    if {t.get_secret_value() for t in serving.api_tokens.values()} & dev_tokens:
        raise ValueError(
            f"environment={environment} still uses the local development API token; "
            'set WAP_SERVING__API_TOKENS=\'{"<analyst>": "<secret>"}\'.'
        )
    for setting in ("sql.token", "monitoring.metrics_token"):
        name, field = setting.split(".")
        section = getattr(settings, name)
        if getattr(section, field) == getattr(type(section)(), field):
            raise ValueError(
                f"environment={environment} still uses the local development {setting}; "
                f"set {_variable(setting)}."
            )
