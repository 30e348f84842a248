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

__all__ = [
    "hll_bytes",
    "hll_merged",
    "hll_register_estimate",
    "hll_union",
    "kll_bytes",
    "kll_merged",
    "kll_n",
    "kll_quantile",
]


def _datasketches() -> ModuleType:
    try:
        import datasketches
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "views.sketches needs the Apache DataSketches Python package: "
            "pip install 'datasketches==5.2.0'"
        ) from error
    return datasketches


def hll_merged(sketches: Iterable[bytes | bytearray | None], lg_max_k: int = HLL_LG_K):
    """The union of HLL sketches (None entries are skipped), or None when there are none.

    One sketch is returned as it is; more are unioned with ``lg_max_k`` as the
    union's precision cap: sketches built with a larger lgConfigK are
    downsampled to it, as Spark's ``hll_union_agg`` does.
    """
    ds = _datasketches()
    present = [bytes(s) for s in sketches if s is not None]
    if not present:
        return None
    if len(present) == 1:
        return ds.hll_sketch.deserialize(present[0])
    union = ds.hll_union(lg_max_k)
    for sketch in present:
        union.update(ds.hll_sketch.deserialize(sketch))
    return union


def hll_union(sketches: Iterable[bytes | bytearray | None], lg_max_k: int = HLL_LG_K) -> float:
    """Distinct-count estimate of the union of HLL sketches; no sketches give 0.0."""
    merged = hll_merged(sketches, lg_max_k)
    return 0.0 if merged is None else float(merged.get_estimate())


def hll_register_estimate(sketch: bytes | bytearray | None, lg_max_k: int = HLL_LG_K) -> float:
    """The distinct-count estimate of a sketch's registers alone (0.0 for None).

    A sketch built in one pass (Spark's ``hll_sketch_agg`` over a whole window)
    carries a HIP estimate that depends on the order of its updates; the union
    of the same values in parts (the speed layer's micro-batches) has the same
    registers but estimates with the composite estimator, up to ~1.5% apart.
    A union of the sketch with itself always estimates from the registers, so
    equal registers give equal estimates, whatever built them.
    """
    if sketch is None:
        return 0.0
    ds = _datasketches()
    parsed = ds.hll_sketch.deserialize(bytes(sketch))
    union = ds.hll_union(lg_max_k)
    union.update(parsed)
    union.update(parsed)
    return float(union.get_estimate())


def kll_merged(sketches: Iterable[bytes | bytearray | None]):
    """The merge of KLL doubles sketches (None entries are skipped), or None when there are none."""
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
    merged = kll_merged(sketches)
    return 0 if merged is None else int(merged.n)


def kll_quantile(sketches: Iterable[bytes | bytearray | None], q: float) -> float | None:
    """The ``q`` quantile (0 <= q <= 1) of the merged KLL doubles sketches.

    Rank is inclusive, as in Spark's ``kll_sketch_get_quantile_double``: the
    smallest value whose share of values at or below it is at least ``q``.
    None when the sketches hold no values.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must lie in [0, 1]; got {q!r}.")
    merged = kll_merged(sketches)
    if merged is None or merged.is_empty():
        return None
    return float(merged.get_quantile(q, True))


def hll_bytes(merged) -> bytes | None:
    """The stored form of :func:`hll_merged`'s result: compact ``HLL_8`` bytes, as Spark writes.

    >>> hll_bytes(None) is None
    True
    """
    if merged is None:
        return None
    ds = _datasketches()
    if isinstance(merged, ds.hll_union):
        merged = merged.get_result(ds.tgt_hll_type.HLL_8)
    return bytes(merged.serialize_compact())


def kll_bytes(merged) -> bytes | None:
    """The stored form of :func:`kll_merged`'s result: the sketch's compact bytes."""
    return None if merged is None else bytes(merged.serialize())
