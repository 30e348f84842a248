"""Measure kinds: everything every layer needs to know about a kind of measure, in one place.

A view's measure is a *partial* value of one window; its kind says how
partials merge and what an answer shows. Each :class:`Kind` holds, for one
kind: its Cassandra and Spark column types, how Spark merges partials
(batch merges, rollups), how Python merges them (serving), the numbers an
answer shows, how top-N ranks by it and the quality rule its values obey.
The speed and batch tables, serving and the quality gate read this table
and nothing else: adding a kind is one entry in :data:`KINDS` plus its tests.

>>> kind("count").cql_type, kind("hll").spark_type
('bigint', 'binary')
>>> kind("max").merge([2.0, None, 5.0]), kind("count").answer(None)
(5.0, 0)
>>> kind("avg")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Unknown measure kind 'avg'; the kinds are: count, sum, max, ...

Spark and DataSketches are imported where they are used, so importing this
module (the view specs, the Cassandra layout, serving) needs neither.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from views.sketches import hll_bytes, hll_merged, kll_bytes, kll_merged

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = [
    "HLL_TOLERANCE",
    "KINDS",
    "SUM_TOLERANCE",
    "Kind",
    "MeasureKind",
    "kind",
    "quantile_name",
]

SUM_TOLERANCE = 1e-9
"""Reconciliation of ``sum`` measures: the speed layer adds partial sums per micro-batch,
so floating-point rounding differs from one pass."""
HLL_TOLERANCE = 0.01
"""Reconciliation of ``hll`` measures, by the estimates of the sketches' registers
(:func:`views.sketches.hll_register_estimate`): both layers hash the same identities into
the same registers, so they are equal when nothing is wrong; the bound absorbs a sketch
built under another ``lgConfigK``, which a union downsamples. (The sketches' own estimates
are not compared: one pass estimates with HIP, a union with the composite estimator, up to
~1.5% apart on the same registers.) ``kll`` measures compare their number of values: a
sketch compacts at random beyond ``k`` values, so quantiles differ within its rank error."""

MeasureKind = Literal["count", "sum", "max", "min", "hll", "kll"]
"""The names of :data:`KINDS` (for type checkers; :data:`KINDS` is the source)."""


def quantile_name(name: str, q: float) -> str:
    """``load_sketch``, 0.95 -> ``load_sketch_p95``: the answer column of one quantile.

    >>> quantile_name("load_ms", 0.999)
    'load_ms_p99_9'
    """
    return f"{name}_p{q * 100:g}".replace(".", "_")


@dataclass(frozen=True)
class Kind:
    """One kind of measure, as every layer handles it."""

    name: str
    description: str
    cql_type: str
    """Column type in the speed and batch tables."""
    spark_type: str
    """Column type of the views' rows in Spark (gold, speed frames)."""
    spark_merge: Callable[[Column], Column]
    """Aggregate merging partial values of a column (``groupBy().agg``)."""
    spark_answer: Callable[[str, Sequence[float]], list[Column]]
    """The answer columns of a measure column, given its name and the quantiles asked for."""
    merge: Callable[[Sequence[Any]], Any]
    """Python merge of partial values (``None`` values are absent rows) into one partial."""
    answer: Callable[[Any], Any]
    """The number an answer shows for one merged partial (``None``: no rows); for a
    :attr:`quantiles` kind, the merged sketch's number of values."""
    answer_source: str
    """:attr:`answer` of one stored value ``{v}`` as a Python expression, for serving's
    generated row formatter (it may call ``hll_read`` and ``kll_read``)."""
    rank_label: str
    """What a top-N by this measure ranks by: ``sum``, ``max``, ``distinct``; for a
    :attr:`quantiles` kind ``p{q}``, formatted with the requested quantile in percent."""
    non_negative: bool = False
    """Quality rule: a published value is never below zero."""
    integral: bool = False
    """Answers are whole numbers (counts, distinct counts)."""
    quantiles: bool = False
    """A sketch of values: an answer shows ``<m>_n`` and one number per requested quantile
    (:func:`quantile_name`) instead of :attr:`answer`, and top-N ranks by a quantile."""
    sketch: bool = False
    """Binary DataSketches bytes (estimated, not read, by an answer)."""
    distinct: bool = False
    """A distinct count whose partials union over any range of windows: what a reach
    answer (distinct visitors over days) estimates."""
    quantile: Callable[[Any, float], float | None] | None = None
    """For a :attr:`quantiles` kind: the ``q`` quantile of a merged partial (None if empty)."""
    stored: Callable[[Any], Any] = lambda merged: merged
    """A merged partial (:attr:`merge`) as a table stores it: sketches as their bytes."""
    comparable: Callable[[Any], Any] = lambda value: value
    """Reconciliation: the number a stored value is compared by between the layers (a
    missing value as the layers merge it)."""
    tolerance: float = 0.0
    """Reconciliation: the relative (and absolute) difference the two layers' values of a
    closed window may show; 0: exactly equal."""

    def agrees(self, batch: Any, speed: Any) -> bool:
        """Whether two :attr:`comparable` values of the layers agree.

        >>> kind("count").agrees(3, 3), kind("sum").agrees(0.1 + 0.2, 0.3)
        (True, True)
        >>> kind("hll").agrees(100.0, 100.5), kind("kll").agrees(200, 199)
        (True, False)
        >>> kind("max").agrees(None, 1.0), kind("min").agrees(None, None)
        (False, True)
        """
        if batch is None or speed is None:
            return batch is None and speed is None
        if self.tolerance:
            return math.isclose(batch, speed, rel_tol=self.tolerance, abs_tol=self.tolerance)
        return bool(batch == speed)

    def merge_stored(self, values: Sequence[Any]) -> Any:
        """Stored partial values (``None``: absent) merged into one stored value."""
        return self.stored(self.merge(values))

    def answer_names(self, name: str, quantiles: Sequence[float]) -> list[str]:
        """The answer columns of a measure ``name`` of this kind."""
        if self.quantiles:
            return [f"{name}_n", *(quantile_name(name, q) for q in quantiles)]
        return [name]

    def answers(self, name: str, merged: Any, quantiles: Sequence[float]) -> dict[str, Any]:
        """The answer of a measure ``name`` from its merged partial (``None``: no rows)."""
        if not self.quantiles:
            return {name: self.answer(merged)}
        assert self.quantile is not None
        n = self.answer(merged)
        out: dict[str, Any] = {f"{name}_n": n}
        for q in quantiles:
            out[quantile_name(name, q)] = self.quantile(merged, q) if n else None
        return out


def _present(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def _add(values: Sequence[Any]) -> Any:
    present = _present(values)
    return sum(present) if present else None


def _largest(values: Sequence[Any]) -> Any:
    present = _present(values)
    return max(present) if present else None


def _smallest(values: Sequence[Any]) -> Any:
    present = _present(values)
    return min(present) if present else None


def _int0(value: Any) -> int:
    return int(value or 0)


def _float0(value: Any) -> float:
    return float(value or 0.0)


def _hll_registers(value: Any) -> float | None:
    from views.sketches import hll_register_estimate

    return hll_register_estimate(value)


def _kll_values(value: Any) -> int:
    from views.sketches import kll_n

    return kll_n([value])


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _spark_sum(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.sum(column)


def _spark_max(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.max(column)


def _spark_min(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.min(column)


def _spark_hll_union(column: Column) -> Column:
    from pyspark.sql import functions as F

    # Sketches built with another lgConfigK (a past setting) union at the smaller one.
    return F.hll_union_agg(column, True)


def _spark_kll_merge(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.kll_merge_agg_double(column)


def _spark_as_is(name: str, _quantiles: Sequence[float]) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.col(name)]


def _spark_hll_estimate(name: str, _quantiles: Sequence[float]) -> list[Column]:
    from pyspark.sql import functions as F

    return [F.hll_sketch_estimate(F.col(name)).alias(name)]


def _spark_kll_quantiles(name: str, quantiles: Sequence[float]) -> list[Column]:
    from pyspark.sql import functions as F

    sketch = F.col(name)
    n = F.kll_sketch_get_n_double(sketch)
    columns = [F.coalesce(n, F.lit(0)).alias(f"{name}_n")]
    for q in quantiles:
        value = F.when(n > 0, F.kll_sketch_get_quantile_double(sketch, F.lit(q)))
        columns.append(value.alias(quantile_name(name, q)))
    return columns


def _kll_size(sketch: Any) -> int:
    return 0 if sketch is None else int(sketch.n)


def _kll_quantile(sketch: Any, q: float) -> float | None:
    if sketch is None or sketch.is_empty():
        return None
    # Inclusive rank, as Spark's kll_sketch_get_quantile_double.
    return float(sketch.get_quantile(q, True))


def _hll_answer(sketch: Any) -> int:
    if isinstance(sketch, bytes | bytearray):
        sketch = hll_merged([sketch])
    return 0 if sketch is None else round(sketch.get_estimate())


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "count",
            "A number of events: partials add; an answer without rows is 0.",
            cql_type="bigint",
            spark_type="long",
            spark_merge=_spark_sum,
            spark_answer=_spark_as_is,
            merge=_add,
            answer=lambda v: v or 0,
            answer_source="{v} or 0",
            rank_label="sum",
            non_negative=True,
            integral=True,
            comparable=_int0,
        ),
        Kind(
            "sum",
            "A total of values: partials add; an answer without rows is null.",
            cql_type="double",
            spark_type="double",
            spark_merge=_spark_sum,
            spark_answer=_spark_as_is,
            merge=_add,
            answer=_float,
            answer_source="None if {v} is None else float({v})",
            rank_label="sum",
            non_negative=True,
            comparable=_float0,
            tolerance=SUM_TOLERANCE,
        ),
        Kind(
            "max",
            "The largest value: partials take the larger.",
            cql_type="double",
            spark_type="double",
            spark_merge=_spark_max,
            spark_answer=_spark_as_is,
            merge=_largest,
            answer=_float,
            answer_source="None if {v} is None else float({v})",
            rank_label="max",
            non_negative=True,
            comparable=_float,
        ),
        Kind(
            "min",
            "The smallest value: partials take the smaller.",
            cql_type="double",
            spark_type="double",
            spark_merge=_spark_min,
            spark_answer=_spark_as_is,
            merge=_smallest,
            answer=_float,
            answer_source="None if {v} is None else float({v})",
            rank_label="min",
            comparable=_float,
        ),
        Kind(
            "hll",
            "Distinct values, as a HyperLogLog sketch: partials union; answers are estimates.",
            cql_type="blob",
            spark_type="binary",
            spark_merge=_spark_hll_union,
            spark_answer=_spark_hll_estimate,
            merge=hll_merged,
            stored=hll_bytes,
            answer=_hll_answer,
            answer_source="0 if {v} is None else round(hll_read({v}).get_estimate())",
            rank_label="distinct",
            integral=True,
            sketch=True,
            distinct=True,
            comparable=_hll_registers,
            tolerance=HLL_TOLERANCE,
        ),
        Kind(
            "kll",
            "Values' distribution, as a KLL doubles sketch: partials merge; answers are quantiles.",
            cql_type="blob",
            spark_type="binary",
            spark_merge=_spark_kll_merge,
            spark_answer=_spark_kll_quantiles,
            merge=kll_merged,
            stored=kll_bytes,
            answer=_kll_size,
            answer_source="0 if {v} is None else kll_read({v}).n",
            rank_label="p{q}",
            quantiles=True,
            sketch=True,
            quantile=_kll_quantile,
            comparable=_kll_values,
        ),
    )
}
"""Every measure kind by name, in the order docs and errors list them."""


def kind(name: str) -> Kind:
    """The kind called ``name``."""
    found = KINDS.get(name)
    if found is None:
        raise ValueError(f"Unknown measure kind {name!r}; the kinds are: {', '.join(KINDS)}.")
    return found
