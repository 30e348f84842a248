"""CQL CREATE TABLE statements as Amazon Keyspaces table definitions.

The platform declares its Cassandra tables as CQL (``layout/``). Terraform describes
Keyspaces tables as columns, partition key, clustering key (with order) and a
default TTL. This module reads the one into the other, so the Terraform is
generated from the statements the code runs and cannot drift from them.

Only what Keyspaces supports is carried over: compaction and other
Cassandra-only table options are dropped (Keyspaces manages storage itself).

>>> table = parse_create_table(
...     "CREATE TABLE IF NOT EXISTS ks.t (k text, day date, ts timestamp, n bigint, "
...     "PRIMARY KEY ((k, day), ts)) WITH CLUSTERING ORDER BY (ts DESC) "
...     "AND default_time_to_live = 60"
... )
>>> table.name, table.partition_key, table.clustering_key, table.default_time_to_live
('t', ('k', 'day'), (('ts', 'DESC'),), 60)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

__all__ = ["KeyspacesTable", "parse_create_table"]

_CREATE = re.compile(
    r"^\s*CREATE TABLE (?:IF NOT EXISTS )?(?:\w+\.)?(?P<name>\w+)\s*\(",
    re.IGNORECASE,
)
_ORDER = re.compile(r"CLUSTERING ORDER BY \((?P<order>[^)]*)\)", re.IGNORECASE)
_TTL = re.compile(r"default_time_to_live\s*=\s*(?P<ttl>\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class KeyspacesTable:
    """One table as Keyspaces sees it: what ``aws_keyspaces_table`` needs."""

    name: str
    columns: tuple[tuple[str, str], ...]
    partition_key: tuple[str, ...]
    clustering_key: tuple[tuple[str, str], ...] = ()
    default_time_to_live: int | None = None

    def as_terraform(self) -> dict[str, Any]:
        """Plain data for the Terraform locals the ``cassandra`` module iterates over."""
        return {
            "columns": [{"name": name, "type": type_} for name, type_ in self.columns],
            "partition_key": list(self.partition_key),
            "clustering_key": [
                {"name": name, "order_by": order} for name, order in self.clustering_key
            ],
            "default_time_to_live": self.default_time_to_live,
        }


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses or angle brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "(<":
            depth += 1
        elif char in ")>":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    parts.append("".join(current).strip())
    return [part for part in parts if part]


def _names(text: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in text.strip().strip("()").split(",") if name.strip())


def _body_and_options(statement: str, start: int) -> tuple[str, str]:
    """The column list (between the parentheses opened at ``start``) and the WITH clause."""
    depth = 0
    for index in range(start, len(statement)):
        depth += {"(": 1, ")": -1}.get(statement[index], 0)
        if depth == 0:
            rest = statement[index + 1 :].strip()
            if rest and not rest.upper().startswith("WITH "):
                raise ValueError(f"Unexpected text after the column list: {rest[:40]!r}.")
            return statement[start + 1 : index], rest[len("WITH ") :]
    raise ValueError(f"Unbalanced parentheses in {statement[:80]!r}...")


def parse_create_table(statement: str) -> KeyspacesTable:
    """Read one CREATE TABLE statement; raise ValueError on anything it cannot map."""
    match = _CREATE.match(statement)
    if match is None:
        raise ValueError(f"Not a CREATE TABLE statement: {statement[:80]!r}...")
    name = match["name"]
    body, options = _body_and_options(statement, match.end() - 1)
    columns: list[tuple[str, str]] = []
    primary_key: str | None = None
    for part in _split_top_level(body):
        if part.upper().startswith("PRIMARY KEY"):
            primary_key = part[len("PRIMARY KEY") :].strip()[1:-1]
            continue
        column, _, type_ = part.partition(" ")
        type_ = type_.strip()
        if type_.upper().endswith(" PRIMARY KEY"):
            type_, primary_key = type_[: -len(" PRIMARY KEY")].strip(), column
        columns.append((column, type_.lower()))
    if primary_key is None:
        raise ValueError(f"Table {name!r} declares no PRIMARY KEY.")
    key_parts = _split_top_level(primary_key)
    partition_key, clustering = _names(key_parts[0]), key_parts[1:]
    order = dict.fromkeys(clustering, "ASC")
    if found := _ORDER.search(options):
        for item in _split_top_level(found["order"]):
            key, _, direction = item.partition(" ")
            if key not in order:
                raise ValueError(
                    f"Table {name!r} orders by {key!r}, which is not a clustering key."
                )
            order[key] = direction.strip().upper() or "ASC"
    declared = {column for column, _ in columns}
    undeclared = [key for key in (*partition_key, *order) if key not in declared]
    if undeclared:
        raise ValueError(f"Table {name!r} keys on undeclared columns {undeclared}.")
    ttl = _TTL.search(options)
    return KeyspacesTable(
        name=name,
        columns=tuple(columns),
        partition_key=partition_key,
        clustering_key=tuple(order.items()),
        default_time_to_live=int(ttl["ttl"]) if ttl else None,
    )
