"""What a view is: its keys, its measures and how each measure merges.

A :class:`ViewSpec` pairs a view's build function with the shape of its output,
so the speed layer, the batch layer and serving can handle every view the same
way: write rows keyed by ``(window_start, *keys)``, and merge any range of them
by each measure's kind (:mod:`views.kinds`).

>>> spec = ViewSpec(
...     name="clicks",
...     keys=("target",),
...     measures=(Measure("clicks", "count"),),
...     build=lambda events: events,
...     description="Clicks per target.",
... )
>>> spec.columns
('window_start', 'target', 'clicks')
>>> Measure("p95", "avg")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Measure 'p95': kind 'avg' is not one of count, sum, max, ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from views.common import WINDOW
from views.kinds import KINDS, MeasureKind

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["MEASURE_KINDS", "Measure", "MeasureKind", "ViewSpec"]

MEASURE_KINDS: tuple[str, ...] = tuple(KINDS)
"""How partial values of a measure can merge: the kinds of :mod:`views.kinds`."""


@dataclass(frozen=True)
class Measure:
    """One output column of a view and how its partial values merge."""

    name: str
    kind: MeasureKind
    description: str = ""
    signed: bool = False
    """Its values may be below zero (a net amount, e.g. revenue less refunds): the gold gate
    does not hold it to the kind's not-negative rule."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"Measure name {self.name!r} must be a plain identifier.")
        if self.kind not in MEASURE_KINDS:
            raise ValueError(
                f"Measure {self.name!r}: kind {self.kind!r} is not one of "
                f"{', '.join(MEASURE_KINDS)}."
            )

    @property
    def is_sketch(self) -> bool:
        """True for sketch measures (binary DataSketches bytes)."""
        return KINDS[self.kind].sketch


@dataclass(frozen=True)
class ViewSpec:
    """A view: its build function and the columns it produces.

    The output of ``build`` has exactly :attr:`columns`: ``window_start``
    (start of the event-time window, a timestamp), the keys, then the
    measures. One row per ``(window_start, *keys)``.
    """

    name: str
    keys: tuple[str, ...]
    measures: tuple[Measure, ...]
    build: Callable[[DataFrame], DataFrame]
    description: str
    window: str = WINDOW
    constant_key: tuple[str, ...] | None = None
    """The one key of a view keyed by a constant (the whole site: ``("all",)``); a
    question that names no key of such a view asks about it."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"View name {self.name!r} must be a plain identifier.")
        if not isinstance(self.keys, tuple) or not isinstance(self.measures, tuple):
            raise TypeError(f"View {self.name!r}: keys and measures must be tuples.")
        if not self.keys or not self.measures:
            raise ValueError(f"View {self.name!r} needs at least one key and one measure.")
        names = self.columns
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"View {self.name!r}: column names used twice: {duplicates}.")
        if self.constant_key is not None and len(self.constant_key) != len(self.keys):
            raise ValueError(f"View {self.name!r}: constant_key must give every key a value.")

    @property
    def columns(self) -> tuple[str, ...]:
        """Output columns in order: ``window_start``, keys, measures."""
        return ("window_start", *self.keys, *(m.name for m in self.measures))

    def measure(self, name: str) -> Measure:
        """The measure called ``name``."""
        for measure in self.measures:
            if measure.name == name:
                return measure
        known = ", ".join(m.name for m in self.measures)
        raise KeyError(f"View {self.name!r} has no measure {name!r}; it has: {known}.")
