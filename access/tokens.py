"""Issued tokens: their shape, and the digest that is all the platform keeps of them.

A token is ``wap.<id>.<secret>``: ``id`` names it (in listings, audit rows and
``platformctl access revoke``), ``secret`` is 256 random bits. The store keeps
the SHA-256 of the whole token, never the token (a random secret of that length
needs no slow hash: nothing can be guessed from the digest). A token is shown
once, when it is issued.

>>> token = new_token()
>>> parsed = token_id(token.text)
>>> parsed == token.id, len(token.digest)
(True, 64)
>>> matches(token.text, token.digest), matches(token.text + "x", token.digest)
(True, False)
>>> token_id("Bearer nonsense") is None, token_id("wap..x") is None
(True, True)
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = ["NewToken", "digest_of", "matches", "new_token", "token_id"]

_SHAPE = re.compile(r"wap\.([0-9a-f]{12})\.[A-Za-z0-9_-]{43}")


@dataclass(frozen=True)
class NewToken:
    id: str
    text: str
    """The token itself: shown once, to whom it is issued."""
    digest: str


def new_token() -> NewToken:
    token_id_, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
    text = f"wap.{token_id_}.{secret}"
    return NewToken(token_id_, text, digest_of(text))


def digest_of(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def token_id(text: str) -> str | None:
    """The id of an issued token's text; None when ``text`` is not shaped as one."""
    found = _SHAPE.fullmatch(text)
    return found.group(1) if found else None


def matches(text: str, digest: str) -> bool:
    """Whether ``text`` is the token ``digest`` was taken of (in constant time)."""
    return hmac.compare_digest(digest_of(text), digest)
