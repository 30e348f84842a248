"""What a question may ask, checked before anything is read, and how answers are shared.

:class:`Limits` bounds one question (range, buckets, partitions, keys,
quantiles); :class:`CacheRules` says how long answers and merged blocks are
kept (:mod:`serving.cache`); the ``check_*`` functions turn a bad request
into a :class:`serving.errors.QueryError` that says what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from serving.errors import QueryError
from serving.timerange import iso
from views import ViewSpec
from views.spec import Measure

if TYPE_CHECKING:
    from core.settings import ServingSettings
    from serving.store import ServingStore

__all__ = [
    "CacheRules",
    "Limits",
    "RangeQuery",
    "check_keys",
    "check_measures",
    "check_quantiles",
    "key_dict",
    "view_spec",
]


@dataclass(frozen=True)
class Limits:
    """What one question may ask for (from :class:`core.settings.ServingSettings`)."""

    max_range_days: int = 31
    max_buckets: int = 2880
    max_top_partitions: int = 2000
    """Most partitions a top-N may read: with the rollups a month is about 200-300; a range
    over days published without rollups reads 1,440 per day."""
    max_keys: int = 20
    max_n: int = 100
    max_quantiles: int = 10

    @classmethod
    def from_settings(cls, serving: ServingSettings) -> Limits:
        return cls(
            max_range_days=serving.max_range_days,
            max_buckets=serving.max_buckets,
            max_top_partitions=serving.max_top_partitions,
        )


@dataclass(frozen=True)
class CacheRules:
    """How long answers are shared (from :class:`core.settings.ServingSettings`)."""

    entries: int = 4096
    """Answers kept per worker; 0 keeps none (identical concurrent requests still share)."""
    max_age_s: float = 30.0
    """Longest an answer with speed windows is reused (its key also changes with every
    speed micro-batch the worker's pointers see)."""
    final_max_age_s: float = 600.0
    """Longest an answer from batch windows only is reused (its key changes with a publish)."""
    block_entries: int = 2048
    """Merged immutable top-N blocks kept per worker (:mod:`serving.ranking`)."""
    stale_s: float = 10.0
    """While the answer over a new speed micro-batch is computed, the one over the previous
    micro-batch is answered (marked stale) if at most this old; 0: requests wait."""

    @classmethod
    def from_settings(cls, serving: ServingSettings) -> CacheRules:
        return cls(
            entries=serving.result_cache_entries,
            max_age_s=serving.result_cache_s,
            final_max_age_s=serving.final_result_cache_s,
            block_entries=serving.block_cache_entries,
            stale_s=serving.stale_answer_s,
        )


@dataclass(frozen=True)
class RangeQuery:
    """A validated range: windows whose start lies in ``[lo, hi)`` (epoch ms)."""

    lo: int
    hi: int
    moving: tuple[str, str] | None = None
    """The range as asked, ``(start, end)``, when it moves with the clock (``now-15m``,
    ``now``): the same question a minute later is the same moving range over later windows."""

    @classmethod
    def checked(
        cls, lo: int, hi: int, limits: Limits, moving: tuple[str, str] | None = None
    ) -> RangeQuery:
        if hi < lo:
            raise QueryError(
                "invalid_range", f"end ({iso(hi)}) lies before start ({iso(lo)}); swap them."
            )
        days = (hi - lo) / (24 * 3600 * 1000)
        if days > limits.max_range_days:
            raise QueryError(
                "range_too_large",
                f"The range spans {days:.1f} days; at most {limits.max_range_days} are allowed. "
                "Ask for a shorter range, or use SQL over the gold tables for longer ones.",
            )
        return cls(lo, hi, moving)


def view_spec(store: ServingStore, view: str) -> ViewSpec:
    try:
        return store.spec(view)
    except KeyError:
        known = ", ".join(store.views)
        raise QueryError("unknown_view", f"No view {view!r}; the views are: {known}.") from None


def key_dict(spec: ViewSpec, key: tuple[str, ...]) -> dict[str, str]:
    return dict(zip(spec.keys, key, strict=True))


def check_keys(spec: ViewSpec, keys: Sequence[tuple[str, ...]], limits: Limits) -> None:
    """Every key names one value per key column of the view; not too many keys."""
    if not keys:
        raise QueryError(
            "missing_key", f"Name at least one {'/'.join(spec.keys)} of view {spec.name!r}."
        )
    if len(keys) > limits.max_keys:
        raise QueryError(
            "too_many_keys", f"{len(keys)} keys asked; at most {limits.max_keys} per question."
        )
    for key in keys:
        if len(key) != len(spec.keys):
            raise QueryError(
                "invalid_key",
                f"View {spec.name!r} is keyed by {list(spec.keys)}; got {list(key)!r}.",
            )
        for value in key:
            if not isinstance(value, str) or not value or len(value) > 2048:
                raise QueryError(
                    "invalid_key",
                    f"A key is a non-empty string of at most 2048 characters; got {value!r}.",
                )


def check_quantiles(quantiles: Sequence[float], limits: Limits) -> tuple[float, ...]:
    """The quantiles of kll measures one answer shows: each in [0, 1], not too many.

    >>> check_quantiles([0.9, 0.99], Limits())
    (0.9, 0.99)
    """
    if not quantiles:
        raise QueryError("invalid_quantile", "Ask for at least one quantile, e.g. quantile=0.95.")
    if len(quantiles) > limits.max_quantiles:
        raise QueryError(
            "too_many_quantiles",
            f"{len(quantiles)} quantiles asked; at most {limits.max_quantiles} per question.",
        )
    for q in quantiles:
        if not 0.0 <= q <= 1.0:  # also refuses NaN
            raise QueryError(
                "invalid_quantile",
                f"Each quantile must lie in [0, 1] (0.95 is the 95th percentile); got {q}.",
            )
    return tuple(float(q) for q in quantiles)


def check_measures(spec: ViewSpec, names: Sequence[str]) -> tuple[Measure, ...]:
    """The view's measures called ``names`` in the view's order (all for none)."""
    if not names:
        return spec.measures
    known = {m.name for m in spec.measures}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise QueryError(
            "unknown_measure",
            f"View {spec.name!r} has no measure {unknown[0]!r}; it has: "
            + ", ".join(m.name for m in spec.measures)
            + ".",
        )
    return tuple(m for m in spec.measures if m.name in set(names))
