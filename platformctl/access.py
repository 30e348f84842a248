"""``platformctl access``: issue, revoke and list the analysts' and services' tokens.

A token is printed once, when issued; the platform keeps only its digest
(:mod:`access.store`). The services see an issued or revoked token within
``access.refresh_s``, with no restart.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from typing import Any

from core.settings import Settings

__all__ = ["access_command", "add_access_parser"]


def add_access_parser(commands: Any) -> None:
    access = commands.add_parser("access", help="issue, revoke and list analysts' tokens")
    actions = access.add_subparsers(dest="action", required=True)
    issue = actions.add_parser("issue", help="issue a token (printed once)")
    issue.add_argument("--name", required=True, help="whose token: an analyst or a service")
    issue.add_argument(
        "--team",
        action="append",
        default=[],
        help="a team of pipelines/teams.py the holder belongs to (repeatable)",
    )
    issue.add_argument("--days", type=float, default=None, help="valid this many days")
    revoke = actions.add_parser("revoke", help="revoke a token by id, or every token of a name")
    revoke.add_argument("id_or_name")
    actions.add_parser("list", help="every token issued: id, name, teams, state (no secret)")


def access_command(settings: Settings, args: argparse.Namespace) -> tuple[dict[str, Any], int]:
    """The command's answer and exit code (2: refused)."""
    from access.store import TokenStore
    from core.cassandra import connect
    from pipelines.teams import team_names

    if args.action == "issue":
        unknown = sorted(set(args.team) - team_names())
        if unknown or not args.team:
            return {
                "refused": f"teams {unknown or '(none given)'}: give each with --team, one of "
                f"{', '.join(sorted(team_names()))} (pipelines/teams.py)"
            }, 2
        if not args.name.strip() or len(args.name) > 200:
            return {"refused": "--name: the holder's name, 1-200 characters"}, 2
    cluster, session = connect(settings.cassandra, schema=False)
    try:
        store = TokenStore(session, settings.cassandra.keyspace)
        store.create()
        if args.action == "issue":
            valid = None if args.days is None else timedelta(days=args.days)
            token = store.issue(args.name.strip(), args.team, valid)
            return {
                "id": token.id,
                "name": args.name.strip(),
                "teams": sorted(set(args.team)),
                "token": token.text,
                "note": "shown once: the platform keeps only its digest",
            }, 0
        if args.action == "revoke":
            revoked = store.revoke(args.id_or_name)
            return {"revoked": revoked}, 0 if revoked else 1
        now, issued = datetime.now(UTC), sorted(store.all(), key=lambda t: t.issued_at)
        return {"tokens": [t.listed(now) for t in issued]}, 0
    finally:
        cluster.shutdown()
