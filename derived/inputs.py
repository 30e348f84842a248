"""What a transformation is given: its inputs, narrowed to the columns it reads.

>>> _tree(["context.page.path", "context.campaign", "userId", "context.ip"])
{'userId': None, 'context': {'campaign': None, 'ip': None, 'page': {'path': None}}}
>>> _tree(["context", "context.ip"])
{'context': None}
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["project"]


def _tree(paths: Iterable[str]) -> dict[str, Any]:
    """Dotted paths as a tree of names; ``None`` marks a field read whole."""
    tree: dict[str, Any] = {}
    for path in sorted(paths, key=lambda p: p.count(".")):
        node: dict[str, Any] | None = tree
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
            if node is None:  # a parent read whole holds this field already
                break
        else:
            node[leaf] = None
    return tree


def _column(path: str, branch: dict[str, Any] | None) -> Column:
    from pyspark.sql import functions as F

    if branch is None:
        return F.col(path)
    # A struct of only the fields read, null where the input's struct is null.
    fields = [_column(f"{path}.{name}", sub).alias(name) for name, sub in branch.items()]
    return F.when(F.col(path).isNotNull(), F.struct(*fields))


def project(frame: DataFrame, paths: Iterable[str]) -> DataFrame:
    """``frame`` with only ``paths``: top-level columns as they are, nested fields inside
    structs of the same names holding those fields alone."""
    return frame.select(*(_column(name, sub).alias(name) for name, sub in _tree(paths).items()))
