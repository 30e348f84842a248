"""Merging view rows in plain Python: counts add, maxima max, sketches union.

The same rule as :mod:`views.merge` (the Spark version), over rows read from
Cassandra: every row is a partial of one window; any set of them merges by
each measure's kind, whichever layer it came from. Sketches are the Apache
DataSketches binary formats Spark writes; ``datasketches`` reads them.

An answer shows numbers, not sketches: an ``hll`` measure becomes its
distinct-count estimate, a ``kll`` measure ``m`` becomes ``m_n`` and one
quantile per requested ``q`` (``m_p50``, ``m_p95`` ...), as
:func:`views.merge.estimates` names them.

>>> from views import view
>>> spec = view("search_terms")
>>> summarise(spec.measures, [(3,), (None,), (4,)])
{'searches': 7}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import datasketches as ds

from views.common import HLL_LG_K
from views.spec import Measure

__all__ = [
    "DEFAULT_QUANTILES",
    "HllEstimate",
    "hll_estimate",
    "measure_names",
    "quantile_name",
    "rank_value",
    "row_formatter",
    "summarise",
]

DEFAULT_QUANTILES: tuple[float, ...] = (0.5, 0.95)


def quantile_name(name: str, q: float) -> str:
    """``load_sketch``, 0.95 -> ``load_sketch_p95`` (as :func:`views.merge.estimates`)."""
    return f"{name}_p{q * 100:g}".replace(".", "_")


def measure_names(measures: Sequence[Measure], quantiles: Sequence[float]) -> list[str]:
    """The numbers an answer shows for ``measures``, in order."""
    names: list[str] = []
    for m in measures:
        if m.kind == "kll":
            names += [f"{m.name}_n", *(quantile_name(m.name, q) for q in quantiles)]
        else:
            names.append(m.name)
    return names


class HllEstimate(NamedTuple):
    """A distinct count and its bounds at two standard deviations."""

    estimate: float
    lower: float
    upper: float


def hll_estimate(sketches: Iterable[bytes | None]) -> HllEstimate:
    """Union of HLL sketches: estimate and 2-sigma bounds (0 for no sketches)."""
    present = [s for s in sketches if s is not None]
    if not present:
        return HllEstimate(0.0, 0.0, 0.0)
    if len(present) == 1:
        sketch = ds.hll_sketch.deserialize(present[0])
    else:
        sketch = ds.hll_union(HLL_LG_K)
        for blob in present:
            sketch.update(ds.hll_sketch.deserialize(blob))
    return HllEstimate(sketch.get_estimate(), sketch.get_lower_bound(2), sketch.get_upper_bound(2))


def _kll(sketches: Iterable[bytes | None]):  # -> ds.kll_doubles_sketch | None
    merged = None
    for blob in sketches:
        if blob is None:
            continue
        part = ds.kll_doubles_sketch.deserialize(blob)
        if merged is None:
            merged = part
        else:
            merged.merge(part)
    return merged


def _one(measure: Measure, values: list[Any], quantiles: Sequence[float], out: dict) -> None:
    kind = measure.kind
    if kind == "count":
        out[measure.name] = sum(v for v in values if v is not None)
    elif kind == "sum":
        present = [v for v in values if v is not None]
        out[measure.name] = float(sum(present)) if present else None
    elif kind == "max":
        present = [v for v in values if v is not None]
        out[measure.name] = float(max(present)) if present else None
    elif kind == "hll":
        out[measure.name] = round(hll_estimate(values).estimate)
    else:
        merged = _kll(values)
        n = 0 if merged is None else int(merged.n)
        out[f"{measure.name}_n"] = n
        for q in quantiles:
            out[quantile_name(measure.name, q)] = float(merged.get_quantile(q, True)) if n else None


def summarise(
    measures: Sequence[Measure],
    rows: Sequence[Sequence[Any]],
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
) -> dict[str, Any]:
    """Merge partial rows (one value per measure, in order) into the numbers of an answer.

    No rows give zero counts, zero distinct counts and null sums, maxima and quantiles.
    """
    out: dict[str, Any] = {}
    for i, measure in enumerate(measures):
        _one(measure, [row[i] for row in rows], quantiles, out)
    return out


def row_formatter(
    measures: Sequence[Measure], quantiles: Sequence[float] = DEFAULT_QUANTILES
) -> Callable[[Sequence[Any] | None], dict[str, Any]]:
    """A fast :func:`summarise` of exactly one row (or None for no rows).

    A minute bucket holds one window, so most answers need no merge at all.
    The function is generated for the measures (straight-line code, one dict
    literal), as this runs once per bucket of every answer. Measure names are
    identifiers (:class:`views.spec.Measure` checks), so the source is safe.

    >>> from views import view
    >>> fmt = row_formatter(view("clicks").measures)
    >>> fmt((4,)), fmt(None)
    ({'clicks': 4}, {'clicks': 0})
    """
    empty = summarise(measures, [], quantiles)
    body, fields = [], []
    for i, m in enumerate(measures):
        if not m.name.isidentifier():  # pragma: no cover - Measure guarantees it
            raise ValueError(f"Measure name {m.name!r} is not an identifier.")
        v = f"v{i}"
        body.append(f"    {v} = row[{i}]")
        if m.kind == "count":
            fields.append(f"{m.name!r}: {v} or 0")
        elif m.kind in ("sum", "max"):
            fields.append(f"{m.name!r}: None if {v} is None else float({v})")
        elif m.kind == "hll":
            fields.append(f"{m.name!r}: 0 if {v} is None else round(hll_read({v}).get_estimate())")
        else:
            body += [
                f"    s{i} = None if {v} is None else kll_read({v})",
                f"    n{i} = 0 if s{i} is None else s{i}.n",
            ]
            fields.append(f"{m.name + '_n'!r}: n{i}")
            for q in quantiles:
                name = quantile_name(m.name, q)
                fields.append(f"{name!r}: s{i}.get_quantile({float(q)!r}, True) if n{i} else None")
    source = "\n".join(
        [
            "def format_row(row):",
            "    if row is None:",
            "        return dict(empty)",
            *body,
            "    return {" + ", ".join(fields) + "}",
        ]
    )
    namespace: dict[str, Any] = {
        "empty": empty,
        "hll_read": ds.hll_sketch.deserialize,
        "kll_read": ds.kll_doubles_sketch.deserialize,
    }
    exec(compile(source, f"<row_formatter {len(measures)} measures>", "exec"), namespace)
    return namespace["format_row"]


def rank_value(measure: Measure, values: list[Any], quantile: float) -> tuple[float | None, int]:
    """The merged value top-N ranks ``measure`` by, and how many samples it rests on.

    count/sum: the total; max: the largest; hll: the distinct-count estimate;
    kll: the ``quantile`` of the merged sketch (the samples are its ``n``).
    """
    if measure.kind == "kll":
        merged = _kll(values)
        if merged is None or merged.is_empty():
            return None, 0
        return float(merged.get_quantile(quantile, True)), int(merged.n)
    out: dict[str, Any] = {}
    _one(measure, values, (), out)
    value = out[measure.name]
    return (None if value is None else float(value)), len(values)
