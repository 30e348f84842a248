"""Sketch bytes from Spark, merged in plain Python (Apache DataSketches).

Spark's ``hll_sketch_agg`` and ``kll_sketch_agg_double`` write the Apache
DataSketches binary formats, which the ``datasketches`` package reads; so a
service can union visitors or merge load-time quantiles of any set of view
rows (e.g. read from Cassandra) without a Spark session. Results agree with
Spark's ``hll_union_agg`` / ``kll_merge_agg_double`` followed by
``hll_sketch_estimate`` / ``kll_sketch_get_quantile_double``.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from views.common import HLL_LG_K

__all__ = ["hll_union", "kll_n", "kll_quantile"]


def _datasketches() -> ModuleType:
    try:
        import datasketches
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "views.sketches needs the Apache DataSketches Python package: "
            "pip install 'datasketches==5.2.0'"
        ) from error
    return datasketches


def hll_union(sketches: Iterable[bytes | bytearray | None], lg_max_k: int = HLL_LG_K) -> float:
    """Distinct-count estimate of the union of HLL sketches (None entries are skipped).

    ``lg_max_k`` caps the union's precision; sketches built with a larger
    lgConfigK are downsampled to it, as Spark's ``hll_union_agg`` does.
    No sketches give 0.0.
    """
    ds = _datasketches()
    union = ds.hll_union(lg_max_k)
    for sketch in sketches:
        if sketch is not None:
            union.update(ds.hll_sketch.deserialize(bytes(sketch)))
    return float(union.get_estimate())


def _kll_merge(sketches: Iterable[bytes | bytearray | None]):  # -> datasketches.kll_doubles_sketch
    ds = _datasketches()
    merged = None
    for sketch in sketches:
        if sketch is None:
            continue
        part = ds.kll_doubles_sketch.deserialize(bytes(sketch))
        if merged is None:
            merged = part
        else:
            merged.merge(part)
    return merged


def kll_n(sketches: Iterable[bytes | bytearray | None]) -> int:
    """How many values the KLL doubles sketches hold together."""
    merged = _kll_merge(sketches)
    return 0 if merged is None else int(merged.n)


def kll_quantile(sketches: Iterable[bytes | bytearray | None], q: float) -> float | None:
    """The ``q`` quantile (0 <= q <= 1) of the merged KLL doubles sketches.

    Rank is inclusive, as in Spark's ``kll_sketch_get_quantile_double``: the
    smallest value whose share of values at or below it is at least ``q``.
    None when the sketches hold no values.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1]; got {q!r}.")
    merged = _kll_merge(sketches)
    if merged is None or merged.is_empty():
        return None
    return float(merged.get_quantile(q, True))
