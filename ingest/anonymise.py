"""What the collector writes instead of personal data: IP networks and keyed hashes.

The contract says which fields are rewritten
(:func:`data_contracts.derive.privacy.anonymised_fields`); the collector's
settings say how an IP address is (``ip_anonymisation``):

- ``truncate`` (default): the network only, as Snowplow's IP anonymisation
  and Google Analytics do: an IPv4 address keeps its /24 (the last octet is
  zeroed), an IPv6 address its /48 (the last 80 bits are zeroed; a 6to4
  address, ``2002::/16``, keeps /40, as its bits 16-48 are an IPv4 address).
  An IPv4-mapped IPv6 address (``::ffff:192.0.2.7``, a dual-stack socket's
  view of an IPv4 client) is written as the IPv4 network.
- ``hash``: HMAC-SHA256 of the address (its 4 or 16 bytes) under a secret
  key, 64 hex digits:
  the same address always gives the same value (visitors can be counted),
  and without the key nobody can hash the 2^32 IPv4 addresses to read it
  back, as they could a plain hash.
- ``keep``: the address as sent.

In every mode a value that is not an IP address (text, a number, an object)
is dropped, so ``context.ip`` holds an IP address or a network or a hash, or
nothing. A field the contract marks ``anonymise: hash`` gets the keyed hash
of its text.

Rewriting copies only the objects on the way to a rewritten field; an event
without one is returned as it is. Each rewrite is memoised per distinct value
(the calls of one request share the request's address).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from functools import lru_cache
from socket import AF_INET, AF_INET6, inet_ntop, inet_pton
from typing import Any

from core.collector_settings import CollectorSettings
from data_contracts import Contract, ContractError
from data_contracts.derive import anonymised_fields

__all__ = ["IPV4_PREFIX", "IPV6_PREFIX", "Anonymiser", "KeyedHash", "keep_ip", "truncate_ip"]

IPV4_PREFIX = 24
"""Bits of an IPv4 address kept by truncation (Snowplow: ``anonOctets: 1``)."""
IPV6_PREFIX = 48
"""Bits of an IPv6 address kept by truncation (Snowplow: ``anonSegments: 5``)."""
_SIX_TO_FOUR_PREFIX = 16 + IPV4_PREFIX
_CACHED = 4096
"""Distinct values whose rewrite each field memoises."""

Rewrite = Callable[[str], str | None]
_MAPPED = bytes(10) + b"\xff\xff"
"""The first 12 bytes of an IPv4-mapped IPv6 address (``::ffff:0:0/96``)."""
_SIX_TO_FOUR = b"\x20\x02"
"""The first 2 bytes of a 6to4 address (``2002::/16``), whose next 4 are an IPv4 address."""


def _packed(text: str) -> bytes | None:
    """The 4 bytes (IPv4, also IPv4-mapped IPv6) or 16 bytes of the address ``text``
    spells (an IPv6 zone, ``%eth0``, is left out); None when it spells none.

    The C parser (``inet_pton``): five to ten times faster than :mod:`ipaddress`,
    and as strict (no leading zeros, no short or hexadecimal IPv4 forms).
    """
    try:
        if ":" not in text:
            return inet_pton(AF_INET, text)
        address, zoned, zone = text.partition("%")
        packed = inet_pton(AF_INET6, address)
    except (OSError, ValueError):  # not an address; a NUL or non-ASCII character
        return None
    if zoned and not zone:
        return None
    return packed[12:] if packed[:12] == _MAPPED else packed


def truncate_ip(text: str) -> str | None:
    """The network of the IP address ``text``; None when ``text`` is not an IP address.

    >>> truncate_ip("192.0.2.133"), truncate_ip("2001:db8:aa:bb:cc::1")
    ('192.0.2.0', '2001:db8:aa::')
    >>> truncate_ip("::ffff:192.0.2.133"), truncate_ip("256.0.0.1")
    ('192.0.2.0', None)
    """
    packed = _packed(text)
    if packed is None:
        return None
    if len(packed) == 4:
        kept = IPV4_PREFIX // 8
        return inet_ntop(AF_INET, packed[:kept] + bytes(4 - kept))
    kept = (_SIX_TO_FOUR_PREFIX if packed[:2] == _SIX_TO_FOUR else IPV6_PREFIX) // 8
    return inet_ntop(AF_INET6, packed[:kept] + bytes(16 - kept))


def keep_ip(text: str) -> str | None:
    """``text`` when it is an IP address, else None."""
    return text if _packed(text) is not None else None


class KeyedHash:
    """HMAC-SHA256 under a secret key, as 64 hex digits."""

    def __init__(self, key: str) -> None:
        self._key = key.encode()

    def __repr__(self) -> str:
        return "KeyedHash(<secret>)"

    def text(self, text: str) -> str:
        """The keyed hash of ``text``'s UTF-8 bytes."""
        return hmac.digest(self._key, text.encode("utf-8", "surrogatepass"), "sha256").hex()

    def ip(self, text: str) -> str | None:
        """The keyed hash of the address's bytes (so every spelling of one address, and
        ``::ffff:192.0.2.7`` and ``192.0.2.7``, agree); None when it is not an IP address."""
        packed = _packed(text)
        return None if packed is None else hmac.digest(self._key, packed, "sha256").hex()


class Anonymiser:
    """Rewrites the fields ``rewrites`` names (dotted paths) in events; leaves the rest."""

    def __init__(self, rewrites: dict[str, Rewrite]) -> None:
        memoised = {path: lru_cache(maxsize=_CACHED)(rewrite) for path, rewrite in rewrites.items()}
        self._rules = tuple((tuple(path.split(".")), rule) for path, rule in memoised.items())
        self._request_ip = memoised.get("context.ip")

    @classmethod
    def for_contract(cls, contract: Contract, settings: CollectorSettings) -> Anonymiser:
        """The rewrites the contract asks for, IPs anonymised as ``settings`` say."""
        fields = anonymised_fields(contract)
        hashed = sorted(path for path, how in fields.items() if how == "hash")
        if settings.hash_key is None and hashed:
            raise ContractError(
                f"{contract.ref}: fields {hashed} are anonymise: hash, which needs the "
                "collector's secret key: set WAP_COLLECTOR__HASH_KEY (`openssl rand -hex 32`)."
            )
        ip: dict[str, Rewrite] = {"truncate": truncate_ip, "keep": keep_ip}
        methods: dict[str, Rewrite] = {}
        if settings.hash_key is not None:  # the settings refuse ip_anonymisation=hash without
            keyed = KeyedHash(settings.hash_key.get_secret_value())
            ip["hash"], methods["hash"] = keyed.ip, keyed.text
        methods["truncate_ip"] = ip[settings.ip_anonymisation]
        return cls({path: methods[how] for path, how in fields.items()})

    def request_ip(self, address: str) -> str | None:
        """The request's address as the collector fills it into ``context.ip``."""
        return address if self._request_ip is None else self._request_ip(address)

    def event(self, event: Any) -> Any:
        """``event`` with its anonymised fields rewritten (a value that cannot be is removed)."""
        if type(event) is not dict:
            return event
        for path, rewrite in self._rules:
            event = _rewritten(event, path, rewrite)
        return event

    def body(self, body: Any) -> Any:
        """A batch body (``{"batch": [calls], "context": {...}}``) with every call rewritten
        and the batch's own ``context`` too; ``body`` itself when nothing changed."""
        if type(body) is not dict:
            return body
        rewritten = self.event(body)
        calls = body.get("batch")
        if type(calls) is list:
            new = [self.event(call) for call in calls]
            if any(after is not before for after, before in zip(new, calls, strict=True)):
                rewritten = {**rewritten, "batch": new}
        return rewritten


def _rewritten(node: dict[str, Any], path: tuple[str, ...], rewrite: Rewrite) -> dict[str, Any]:
    key = path[0]
    value = node.get(key)
    if value is None:  # absent, or null (which enrichment drops)
        return node
    if len(path) > 1:
        if type(value) is not dict:
            return node
        inner = _rewritten(value, path[1:], rewrite)
        return node if inner is value else {**node, key: inner}
    new = rewrite(value) if type(value) is str else None
    if new == value:
        return node
    copy = dict(node)
    if new is None:
        del copy[key]
    else:
        copy[key] = new
    return copy
