"""The examples of ``docs/sql.md``, by name: the docs' SQL and Python is what the tests run.

A Spark SQL example is a fenced ``sql`` block whose first line is ``-- name: <name>``; a
DuckDB one starts with ``-- duckdb: <name>``, and the DuckDB setup is the ``python`` block
that loads the Delta extension.

>>> sorted(doc_queries())[:3]
['devices', 'funnel', 'referrers']
>>> sorted(duckdb_queries())
['gold_events_per_hour', 'gold_top_pages', 'silver_events_by_day']
>>> "LOAD delta" in duckdb_setup()
True
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DOCS", "NOTEBOOK", "doc_queries", "duckdb_queries", "duckdb_setup"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
NOTEBOOK = DOCS.parent / "notebooks" / "analyst.ipynb"
"""The analysts' notebook: the docs' questions over Spark Connect, with plots."""
_BLOCK = re.compile(r"```sql\n-- name: (\w+)\n(.*?)```", re.DOTALL)
_DUCKDB = re.compile(r"```sql\n-- duckdb: (\w+)\n(.*?)```", re.DOTALL)
_PYTHON = re.compile(r"```python\n(.*?)```", re.DOTALL)


def doc_queries(path: Path = DOCS) -> dict[str, str]:
    """Name -> statement of every named Spark SQL example in the docs."""
    return {name: body.strip() for name, body in _BLOCK.findall(path.read_text(encoding="utf-8"))}


def duckdb_queries(path: Path = DOCS) -> dict[str, str]:
    """Name -> statement of every named DuckDB example in the docs."""
    return {name: body.strip() for name, body in _DUCKDB.findall(path.read_text(encoding="utf-8"))}


def duckdb_setup(path: Path = DOCS) -> str:
    """The docs' Python that opens DuckDB, loads the Delta extension and names the tables."""
    blocks = [b for b in _PYTHON.findall(path.read_text(encoding="utf-8")) if "LOAD delta" in b]
    if len(blocks) != 1:
        raise ValueError(f"{path} has {len(blocks)} Python blocks loading DuckDB's Delta; want 1")
    return blocks[0]
