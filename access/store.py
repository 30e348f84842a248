"""The issued tokens, in the platform's Cassandra keyspace: the one owner of that table.

A row per token: its id, the digest of the token (:mod:`access.tokens`), the name
and teams it was issued to, when it was issued, until when it is good and when
it was revoked. Issuing and revoking are ``platformctl access``'s; the services
read every row now and then (:class:`access.directory.Directory`), so a
revocation counts within ``access.refresh_s`` without a restart. Reads and writes
run at ``LOCAL_QUORUM`` (:mod:`layout.consistency`): a revocation written is one
every later read sees.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from access.identity import Identity
from access.tokens import NewToken, matches, new_token, token_id
from layout.pointers import TOKENS_TABLE

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = ["TOKENS_TABLE", "Issued", "TokenStore", "create_statement", "lookup"]


@dataclass(frozen=True)
class Issued:
    """A token as the store keeps it (its digest, never the token)."""

    id: str
    digest: str
    name: str
    teams: frozenset[str]
    issued_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None

    def state(self, now: datetime) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at and now >= self.expires_at else "active"

    def identity(self, text: str, now: datetime) -> Identity | None:
        """Who ``text`` proves to be, if it is this token and the token is good at ``now``."""
        if self.state(now) != "active" or not matches(text, self.digest):
            return None
        return Identity(self.name, self.teams, "token")

    def listed(self, now: datetime) -> dict[str, Any]:
        """The row as ``platformctl access list`` shows it (no digest)."""
        return {
            "id": self.id,
            "name": self.name,
            "teams": sorted(self.teams),
            "issued_at": self.issued_at.isoformat(),
            "expires_at": self.expires_at and self.expires_at.isoformat(),
            "state": self.state(now),
        }


class TokenStore:
    """The ``access_tokens`` table of ``keyspace``: its DDL, its statements."""

    def __init__(self, session: Session, keyspace: str) -> None:
        self.session, self.table = session, f"{keyspace}.{TOKENS_TABLE}"

    def create(self) -> None:
        from core.cassandra import execute_schema

        execute_schema(self.session, create_statement(self.table.split(".", 1)[0]))

    @property
    def insert_token(self) -> str:
        return (
            f"INSERT INTO {self.table} (id, digest, name, teams, issued_at, expires_at) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )

    @property
    def update_revoked(self) -> str:
        return f"UPDATE {self.table} SET revoked_at = ? WHERE id = ?"

    @property
    def select_tokens(self) -> str:
        return (
            f"SELECT id, digest, name, teams, issued_at, expires_at, revoked_at FROM {self.table}"
        )

    def issue(
        self, name: str, teams: Iterable[str], valid_for: timedelta | None = None
    ) -> NewToken:
        """A new token for ``name`` of ``teams``, written as its digest; the token is returned
        to be shown once."""
        from core.cassandra import prepare

        token, now = new_token(), datetime.now(UTC)
        expires = None if valid_for is None else now + valid_for
        self.session.execute(
            prepare(self.session, self.insert_token),
            (token.id, token.digest, name, set(teams), now, expires),
        )
        return token

    def revoke(self, id_or_name: str) -> list[str]:
        """Revoke the token of that id, or every token issued to that name; the ids revoked."""
        from core.cassandra import prepare

        now = datetime.now(UTC)
        found = [t.id for t in self.all() if t.revoked_at is None and id_or_name in (t.id, t.name)]
        update = prepare(self.session, self.update_revoked)
        for found_id in found:
            self.session.execute(update, (now, found_id))
        return found

    def all(self) -> list[Issued]:
        from core.cassandra import prepare

        rows = self.session.execute(prepare(self.session, self.select_tokens))
        return [
            Issued(
                r.id,
                r.digest,
                r.name,
                frozenset(r.teams or ()),
                _utc(r.issued_at),
                _utc(r.expires_at),
                _utc(r.revoked_at),
            )
            for r in rows
        ]


def create_statement(keyspace: str) -> str:
    """The table's CREATE (idempotent), among every table of a keyspace
    (:func:`layout.create_statements`)."""
    return (
        f"CREATE TABLE IF NOT EXISTS {keyspace}.{TOKENS_TABLE} (id text PRIMARY KEY, "
        "digest text, name text, teams set<text>, issued_at timestamp, expires_at timestamp, "
        "revoked_at timestamp)"
    )


def _utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


def lookup(issued: dict[str, Issued], text: str, now: datetime) -> Identity | None:
    """Who the issued token ``text`` proves to be, among ``issued`` (by id)."""
    found = token_id(text)
    entry = issued.get(found) if found else None
    return entry.identity(text, now) if entry else None
