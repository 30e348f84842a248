"""The example queries of ``docs/sql.md``, by name: the docs' SQL is what the tests run.

Each is a fenced ``sql`` block whose first line is ``-- name: <name>``.

>>> sorted(doc_queries())[:3]
['devices', 'funnel', 'referrers']
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DOCS", "doc_queries"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "sql.md"
_BLOCK = re.compile(r"```sql\n-- name: (\w+)\n(.*?)```", re.DOTALL)


def doc_queries(path: Path = DOCS) -> dict[str, str]:
    """Name -> statement of every named example in the docs."""
    return {name: body.strip() for name, body in _BLOCK.findall(path.read_text(encoding="utf-8"))}
