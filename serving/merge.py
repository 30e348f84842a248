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

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import datasketches as ds

from views.kinds import kind, quantile_name
from views.sketches import hll_merged
from views.spec import Measure, ViewSpec

__all__ = [
    "DEFAULT_QUANTILES",
    "HllEstimate",
    "hll_estimate",
    "measure_names",
    "quantile_name",
    "rank_value",
    "rollup_rows",
    "row_formatter",
    "summarise",
]

DEFAULT_QUANTILES: tuple[float, ...] = (0.5, 0.95)


def measure_names(measures: Sequence[Measure], quantiles: Sequence[float]) -> list[str]:
    """The numbers an answer shows for ``measures``, in order."""
    return [n for m in measures for n in kind(m.kind).answer_names(m.name, quantiles)]


class HllEstimate(NamedTuple):
    """A distinct count and its bounds at two standard deviations."""

    estimate: float
    lower: float
    upper: float


def hll_estimate(sketches: Iterable[bytes | None]) -> HllEstimate:
    """Union of HLL sketches: estimate and 2-sigma bounds (0 for no sketches)."""
    sketch = hll_merged(sketches)
    if sketch is None:
        return HllEstimate(0.0, 0.0, 0.0)
    return HllEstimate(sketch.get_estimate(), sketch.get_lower_bound(2), sketch.get_upper_bound(2))


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
        behaviour = kind(measure.kind)
        merged = behaviour.merge([row[i] for row in rows])
        out.update(behaviour.answers(measure.name, merged, quantiles))
    return out


def row_formatter(
    measures: Sequence[Measure], quantiles: Sequence[float] = DEFAULT_QUANTILES
) -> Callable[[Sequence[Any] | None], dict[str, Any]]:
    """A fast :func:`summarise` of exactly one row (or None for no rows).

    A minute bucket holds one window, so most answers need no merge at all.
    The function is generated for the measures (straight-line code, one dict
    literal, each value the kind's ``answer_source``), as this runs once per
    bucket of every answer. Measure names are identifiers
    (:class:`views.spec.Measure` checks), so the source is safe.

    >>> from views import view
    >>> fmt = row_formatter(view("clicks").measures)
    >>> fmt((4,)), fmt(None)
    ({'clicks': 4}, {'clicks': 0})
    """
    empty = summarise(measures, [], quantiles)
    body, fields = [], []
    namespace: dict[str, Any] = {
        "empty": empty,
        "hll_read": ds.hll_sketch.deserialize,
        "kll_read": ds.kll_doubles_sketch.deserialize,
    }
    for i, m in enumerate(measures):
        if not m.name.isidentifier():  # pragma: no cover - Measure guarantees it
            raise ValueError(f"Measure name {m.name!r} is not an identifier.")
        behaviour = kind(m.kind)
        v = f"v{i}"
        body.append(f"    {v} = row[{i}]")
        if not behaviour.quantiles:
            fields.append(f"{m.name!r}: {behaviour.answer_source.format(v=v)}")
            continue
        namespace[f"merge{i}"] = behaviour.merge
        namespace[f"size{i}"], namespace[f"quantile{i}"] = behaviour.answer, behaviour.quantile
        body += [
            f"    s{i} = None if {v} is None else merge{i}(({v},))",
            f"    n{i} = size{i}(s{i})",
        ]
        fields.append(f"{m.name + '_n'!r}: n{i}")
        for q in quantiles:
            name = quantile_name(m.name, q)
            fields.append(f"{name!r}: quantile{i}(s{i}, {float(q)!r}) if n{i} else None")
    source = "\n".join(
        [
            "def format_row(row):",
            "    if row is None:",
            "        return dict(empty)",
            *body,
            "    return {" + ", ".join(fields) + "}",
        ]
    )
    exec(compile(source, f"<row_formatter {len(measures)} measures>", "exec"), namespace)
    return namespace["format_row"]


def rank_value(measure: Measure, values: list[Any], quantile: float) -> tuple[float | None, int]:
    """The merged value top-N ranks ``measure`` by, and how many samples it rests on.

    count/sum: the total; max: the largest; hll: the distinct-count estimate;
    a sketch of values (kll): the ``quantile`` of the merged sketch (the samples are its ``n``).
    """
    behaviour = kind(measure.kind)
    merged = behaviour.merge(values)
    if behaviour.quantiles:
        assert behaviour.quantile is not None
        return behaviour.quantile(merged, quantile), behaviour.answer(merged)
    value = behaviour.answer(merged)
    return (None if value is None else float(value)), len(values)


_TRUNCATE = {
    "hour": lambda t: t.replace(minute=0, second=0, microsecond=0),
    "day": lambda t: t.replace(hour=0, minute=0, second=0, microsecond=0),
}


def rollup_rows(spec: ViewSpec, rows: Iterable[Mapping[str, Any]], grain: str) -> list[dict]:
    """View rows merged per ``hour`` or ``day`` and key, in plain Python: the rollups the
    batch layer publishes (:func:`views.merge.merge_partials` in Spark), for tools and
    tests that write view rows without Spark.

    >>> from datetime import datetime
    >>> from views import view
    >>> rows = [{"window_start": datetime(2024, 1, 1, 10, m), "query": "a", "searches": m}
    ...         for m in (1, 2)]
    >>> rollup_rows(view("search_terms"), rows, "hour")
    [{'window_start': datetime.datetime(2024, 1, 1, 10, 0), 'query': 'a', 'searches': 3}]
    """
    truncate = _TRUNCATE[grain]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for row in rows:
        key = (truncate(row["window_start"]), *(row[k] for k in spec.keys))
        groups.setdefault(key, []).append(row)
    out = []
    for (start, *keys), members in groups.items():
        merged = {
            m.name: kind(m.kind).merge_stored([r[m.name] for r in members]) for m in spec.measures
        }
        out.append({"window_start": start, **dict(zip(spec.keys, keys, strict=True)), **merged})
    return out
