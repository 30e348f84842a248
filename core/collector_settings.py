"""The collector's section of the settings (``WAP_COLLECTOR__*``).

Part of :class:`core.settings.Settings` (and exported from there), kept in a
module of its own as the collector has the most to configure: its address,
sources and limits, browser origins, and what it does to personal data.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from core.credentials import each_long_enough

__all__ = ["CollectorSettings"]

_DEV_SOURCE = "local-website"
_ORIGIN = re.compile(r"(https?://[^/\s:]+(:\d{1,5})?|null)")


class CollectorSettings(BaseModel):
    """The Segment-compatible HTTP collector in front of Kafka."""

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    host: str = "127.0.0.1"
    """Interface the collector listens on (``0.0.0.0`` behind a load balancer)."""
    port: int = Field(default=8088, ge=1, le=65535)
    """HTTP port of the collector."""
    workers: int = Field(default=2, ge=1)
    """Collector processes sharing the port (each on a socket of its own, ``SO_REUSEPORT``),
    each with its own Kafka producer. 2, as serving: the local platform's machine has two
    cores; set it to the cores the collector may use (a worker uses about one)."""
    write_keys: dict[str, SecretStr] = {_DEV_SOURCE: SecretStr("local-dev-write-key")}
    """Source id -> write key (HTTP Basic user). The local default is for this machine only."""
    max_event_bytes: int = Field(default=32 * 1024, ge=1024)
    """Largest accepted event (Segment: 32 KB)."""
    max_request_bytes: int = Field(default=500 * 1024, ge=1024)
    """Largest accepted request body (Segment: 500 KB)."""
    max_batch_events: int = Field(default=2500, ge=1)
    """Most calls in one ``/v1/batch`` or ``/v1/import`` request (Segment: 2,500). A larger
    batch is refused whole (400 ``too_many_events``) and dead-lettered as one record."""
    max_event_depth: int = Field(default=64, ge=8, le=200)
    """Deepest nesting of objects and arrays in one event (the event itself is level 1);
    a deeper event is dead-lettered as ``invalid:too_deep``. At most 200: the log's JSON
    encoder stops at 255 levels."""
    delivery_timeout_s: float = Field(default=10.0, gt=0)
    """How long a request waits for Kafka's acknowledgement before answering 503."""
    linger_ms: int = Field(default=5, ge=0)
    """Producer batching delay: a little latency for much better throughput."""
    compression: Literal["none", "lz4", "zstd", "snappy", "gzip"] = "lz4"
    """Producer compression codec."""
    queue_max_messages: int = Field(default=200_000, ge=1000)
    """Producer queue bound; when full the collector answers 503 instead of buffering more."""
    retry_after_s: int = Field(default=5, ge=1)
    """``Retry-After`` sent with 503 answers."""
    suppressions_wait_s: float = Field(default=5.0, ge=0)
    """How long start-up waits for the suppression list to load before serving anyway."""
    keep_alive_s: float = Field(default=75.0, gt=0)
    """How long an idle client connection stays open. Keep it above the idle timeout of the
    clients and load balancers in front (HTTP libraries: about 5 s; AWS ALB: 60 s), so the
    collector never closes a connection just as a client reuses it (the client would get a
    reset, not an answer)."""
    header_timeout_s: float = Field(default=10.0, gt=0)
    """How long a connection may take to send a request's line and headers before the
    collector closes it (also the wait for the first request on a new connection); a client
    sending half a request (slow loris) is dropped after this."""
    requests_per_connection: int = Field(default=100, ge=0)
    """Requests one keep-alive connection may make; the last is answered
    ``connection: close`` and the client reconnects (0: no limit). The workers share the
    port by connection, so a client keeping a few connections open for good would otherwise
    stay on the workers it first landed on (nginx's ``keepalive_requests``). A batch request
    takes tens of ms; a new connection, a fraction of one."""
    allowed_origins: dict[str, tuple[str, ...]] = {}
    """Source id -> the origins (``https://shop.example``) whose pages may send that source's
    events from a browser (CORS); ``*`` is any origin. A source without an entry takes no
    browser requests; requests without an ``Origin`` (server libraries) are not concerned.
    Unset, the local development source allows any origin and no other source any."""
    allow_any_origin: bool = False
    """Permit ``*`` in ``allowed_origins`` outside ``environment=local`` (say, a public demo)."""
    public_url: str | None = None
    """The collector's address as websites reach it (``https://collect.shop.example``), used
    as the API host in the settings document analytics.js loads; None: each request's own."""
    browser_library_dir: Path | None = None
    """``node_modules`` holding ``@segment/analytics-next``, whose bundle the collector serves
    to websites; None: the one ``platformctl install`` fills under the local state directory."""
    ip_anonymisation: Literal["truncate", "hash", "keep"] = "truncate"
    """What the collector writes for a client IP address (the contract's fields marked
    ``anonymise: truncate_ip``, such as ``context.ip``, and the request's address it fills
    in): ``truncate`` keeps the network only (IPv4 /24, IPv6 /48), ``hash`` a keyed
    HMAC-SHA256 of the address (64 hex digits; needs ``hash_key``), ``keep`` the address as
    sent. In every mode a value that is not an IP address is dropped. See ingest/README.md."""
    hash_key: SecretStr | None = None
    """Secret key of the keyed hash (``ip_anonymisation=hash``, and fields the contract marks
    ``anonymise: hash``), at least 32 characters (``openssl rand -hex 32``). No default: a
    known key would let anyone hash every IPv4 address and read the hashes back."""

    @field_validator("write_keys")
    @classmethod
    def _long_enough(
        cls, value: dict[str, SecretStr], info: ValidationInfo
    ) -> dict[str, SecretStr]:
        return each_long_enough(f"collector.{info.field_name}", value)

    @model_validator(mode="before")
    @classmethod
    def _default_origins(cls, data: Any) -> Any:
        if isinstance(data, dict) and "allowed_origins" not in data:
            sources = data.get("write_keys", {_DEV_SOURCE: None})
            data = {**data, "allowed_origins": {s: ("*",) for s in sources if s == _DEV_SOURCE}}
        return data

    @model_validator(mode="after")
    def _check_batch_fits_the_queue(self) -> CollectorSettings:
        if self.queue_max_messages < self.max_batch_events:
            raise ValueError(
                f"WAP_COLLECTOR__QUEUE_MAX_MESSAGES ({self.queue_max_messages}) is below "
                f"WAP_COLLECTOR__MAX_BATCH_EVENTS ({self.max_batch_events}): a full batch could "
                "never be queued. Raise the queue bound or lower the batch limit."
            )
        return self

    @model_validator(mode="after")
    def _check_hash_key(self) -> CollectorSettings:
        key = self.hash_key.get_secret_value() if self.hash_key is not None else ""
        if self.ip_anonymisation == "hash" and not key:
            raise ValueError(
                "WAP_COLLECTOR__IP_ANONYMISATION=hash needs a secret key: set "
                "WAP_COLLECTOR__HASH_KEY (e.g. the output of `openssl rand -hex 32`)."
            )
        if self.hash_key is not None and len(key) < 32:
            raise ValueError(
                f"WAP_COLLECTOR__HASH_KEY has {len(key)} characters; use at least 32 random "
                "ones (`openssl rand -hex 32`), or a guessed key reverses the hashes."
            )
        return self

    @model_validator(mode="after")
    def _check_origins(self) -> CollectorSettings:
        unknown = sorted(set(self.allowed_origins) - set(self.write_keys))
        if unknown:
            raise ValueError(
                f"WAP_COLLECTOR__ALLOWED_ORIGINS names sources without a write key: {unknown}; "
                f"the sources are {sorted(self.write_keys)}."
            )
        for source, origins in self.allowed_origins.items():
            for origin in origins:
                if origin != "*" and not _ORIGIN.fullmatch(origin):
                    raise ValueError(
                        f"Origin {origin!r} of source {source!r} is not an origin: write "
                        "scheme://host[:port] without a path or a trailing slash, or '*'."
                    )
        return self

    def source_of(self) -> dict[str, str]:
        """Write key -> source id, for authenticating requests."""
        return {key.get_secret_value(): source for source, key in self.write_keys.items()}
