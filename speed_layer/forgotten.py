"""The people a pipeline's speed layer no longer counts: those forgotten everywhere or in it.

The collector drops a forgotten person's new events before Kafka, but only for the pipelines
it carries, and only from the moment it has read the suppression; a producer pipeline's
events reach the topic whatever the list says, and a Kappa replay reads the retained log,
the person's earlier events with it. So every micro-batch of the speed layer, live or
replay, leaves out the events of the people forgotten in its pipeline (:class:`Forgotten`,
applied by :class:`speed_layer.sink.ViewsSink` before any view is built), as the batch
layer leaves them out of bronze and silver. The events reach the sink with each identity
field already a keyed digest (:func:`views.digest.pseudonymise`), so the ids are compared
as digests under the same key.

Where the list comes from: read whole from the suppressions topic when a query starts (a
replay that a forget requested starts after the forget recorded its suppression, so it
always holds it), and kept current by the job's :class:`core.suppressions.SuppressionList`
while the query runs (a forget recorded since counts from the next micro-batch on).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from views.digest import keyed_digest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Forgotten", "without_forgotten"]


class Forgotten:
    """The digests of the ids a pipeline drops now: ``at_start`` (read when its query
    started) and what ``current()`` returns (the live list), under ``key``.

    >>> live = {"u-2"}
    >>> forgotten = Forgotten(b"k" * 32, frozenset({"u-1"}), lambda: frozenset(live))
    >>> sorted(d[:8] for d in forgotten())
    ['79c14fe7', '83e09517']
    >>> live.add("u-3"); len(forgotten())
    3
    """

    def __init__(
        self,
        key: bytes,
        at_start: frozenset[str] = frozenset(),
        current: Callable[[], frozenset[str]] | None = None,
    ) -> None:
        self._key = key
        self._at_start = at_start
        self._current = current
        self._ids: frozenset[str] | None = None
        self._digests: frozenset[str] = frozenset()

    def __call__(self) -> frozenset[str]:
        """The digests now; computed again only when the ids changed."""
        ids = self._at_start | (self._current() if self._current is not None else frozenset())
        if ids != self._ids:
            self._ids = ids
            self._digests = frozenset(d for d in (keyed_digest(self._key, i) for i in ids) if d)
        return self._digests


def without_forgotten(
    events: DataFrame, digests: Collection[str], fields: Sequence[str]
) -> DataFrame:
    """``events`` without those whose identity ``fields`` (digests, the top-level columns it
    holds) name one of ``digests``; unchanged when there are none."""
    present = [name for name in fields if name in events.columns]
    if not digests or not present:
        return events
    from pyspark.sql import functions as F

    values = sorted(digests)
    anyone = F.lit(False)
    for name in present:
        anyone = anyone | F.coalesce(F.col(name).isin(values), F.lit(False))
    return events.where(~anyone)
