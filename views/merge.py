"""Merging partial view rows into coarser ones (hours, days, a whole range, fewer keys).

Every view row is a *partial*: counts and sums add, maxima take the larger,
sketches union. :func:`merge_partials` applies that rule to any set of rows
of one view, and its output is again partial rows of the same shape, so
merges compose (minutes -> hours -> a range; batch rows + speed rows).
:func:`estimates` turns sketch columns into numbers for an answer.
Batch DataFrames only (serving and the batch layer use them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from views.kinds import kind
from views.spec import Measure, ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = ["PERIODS", "estimates", "merge_partials"]

PERIODS = ("minute", "hour", "day", "week", "month", "year")
"""Periods :func:`merge_partials` can group windows by (``date_trunc`` units, UTC)."""


def _merged(measure: Measure) -> Column:
    from pyspark.sql import functions as F

    return kind(measure.kind).spark_merge(F.col(measure.name)).alias(measure.name)


def merge_partials(
    rows: DataFrame,
    spec: ViewSpec,
    *,
    period: str | None = None,
    keys: Sequence[str] | None = None,
) -> DataFrame:
    """Merge rows of view ``spec`` per ``period`` (or over all of them) and ``keys``.

    ``period``: ``None`` merges every window of ``rows`` into one row per key
    (filter ``rows`` to the range first) and drops ``window_start``; a unit of
    :data:`PERIODS` keeps ``window_start``, truncated to that unit.
    ``keys``: the keys to keep, default all of ``spec.keys``; ``()`` merges
    across keys (e.g. visitors of the whole site from per-page rows).
    Output columns: ``[window_start], *keys, *measures``, same types as the input.
    """
    missing = [c for c in spec.columns if c not in rows.columns]
    if missing:
        raise ValueError(
            f"merge_partials({spec.name!r}): rows lack columns {missing}; "
            f"expected the view's columns {list(spec.columns)}."
        )
    if period is not None and period not in PERIODS:
        raise ValueError(f"period must be None or one of {', '.join(PERIODS)}; got {period!r}.")
    kept = tuple(spec.keys if keys is None else keys)
    unknown = [k for k in kept if k not in spec.keys]
    if unknown or isinstance(keys, str):
        raise ValueError(
            f"keys must be a sequence of keys of view {spec.name!r} {list(spec.keys)}; "
            f"got {keys!r}."
        )
    from pyspark.sql import functions as F

    groups = [F.col(k) for k in kept]
    if period is not None:
        groups.insert(0, F.date_trunc(period, "window_start").alias("window_start"))
    return rows.groupBy(*groups).agg(*(_merged(m) for m in spec.measures))


def estimates(
    rows: DataFrame, spec: ViewSpec, *, quantiles: Sequence[float] = (0.5, 0.95)
) -> DataFrame:
    """``rows`` with each sketch measure replaced by numbers.

    An ``hll`` measure becomes its distinct-count estimate (long, same name).
    A ``kll`` measure ``m`` becomes ``m_n`` (values in the sketch) and one
    column per quantile, ``m_p50``, ``m_p95`` ... (null when the sketch is
    null or empty). Other columns pass through.
    """
    from pyspark.sql import functions as F

    bad = [q for q in quantiles if not 0.0 <= q <= 1.0]
    if bad:
        raise ValueError(f"quantiles must lie in [0, 1]; got {bad}.")
    measures = {m.name: m for m in spec.measures}
    columns: list[Column] = []
    for name in rows.columns:
        measure = measures.get(name)
        if measure is None:
            columns.append(F.col(name))
        else:
            columns += kind(measure.kind).spark_answer(name, quantiles)
    return rows.select(*columns)
