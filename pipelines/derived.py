"""What a derived pipeline's declaration says: :class:`DerivedSpec` and its :class:`Input`.

A derived pipeline builds one table from other pipelines' data: a pipeline's
silver events, or another derived pipeline's table. Its transformation is a
pure function of those inputs (a module of :mod:`derived`, named like the
pipeline), its output is checked against its own contract before it is
written, and it is rebuilt by day: the days its inputs changed, and the days
they reach (``Input.reach_days``). Like :mod:`pipelines.spec`, importable
without Spark or Airflow.

>>> spec = DerivedSpec(name="visits", contract="visits", contract_major=1,
...                    inputs=(Input("web_events"),), day="visit_date")
>>> spec.transform, spec.pool, spec.input_names
('visits', 'batch_visits', ('web_events',))
>>> DerivedSpec(name="visits", contract="visits", contract_major=1, inputs=(), day="d")
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Derived pipeline 'visits' needs at least one input: inputs=(Input('orders'),)...
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from data_contracts import Contract

__all__ = ["DerivedSpec", "Input", "input_days", "output_days"]


@dataclass(frozen=True)
class Input:
    """One input of a derived pipeline: a pipeline's silver events, or a derived pipeline's
    table, by the pipeline's name."""

    pipeline: str
    reach_days: int = 0
    """How far forward a day of this input reaches: a change to its day D changes the
    output's days D .. D + reach_days, and building output day d reads its days
    d - reach_days .. d (0: output day d reads input day d only)."""

    def __post_init__(self) -> None:
        if not isinstance(self.pipeline, str) or not self.pipeline.isidentifier():
            raise ValueError(
                f"Input({self.pipeline!r}): name a declared pipeline, e.g. Input('orders')."
            )
        if not isinstance(self.reach_days, int) or not 0 <= self.reach_days <= 366:
            raise ValueError(
                f"Input({self.pipeline!r}, reach_days={self.reach_days!r}): reach_days is a "
                "whole number of days from 0 to 366."
            )


@dataclass(frozen=True)
class DerivedSpec:
    """A table built from other pipelines' data, day by day, gated by its contract."""

    name: str
    """Identifier: the table, its DAGs, pool, ledger and SQL view are named after it."""
    contract: str
    """Contract folder in ``data_contracts/`` describing the output table's rows."""
    contract_major: int
    inputs: tuple[Input, ...]
    day: str
    """The output's date column: the table is partitioned by it and rebuilt by it."""
    transform: str = ""
    """Module of :mod:`derived` holding ``READS`` and ``build``; empty: the pipeline's name."""
    owner: str = "data-platform"
    """Team answering for the table; it may always read it (:mod:`pipelines.teams`)."""
    readers: tuple[str, ...] = ()
    """Other teams that may read the table (SQL, ``/v1/sql``)."""
    identity: tuple[str, ...] = ()
    """Output fields that identify a person (their contract classifies them ``restricted``):
    forget recomputes the days that held the person; SQL hides them."""

    def __post_init__(self) -> None:
        where = f"Derived pipeline {self.name!r}"
        if not self.name.isidentifier():
            raise ValueError(f"Derived pipeline name {self.name!r} must be a plain identifier.")
        if isinstance(self.inputs, Input) or not all(isinstance(i, Input) for i in self.inputs):
            raise TypeError(
                f"{where} lists its inputs as a tuple of Input, e.g. "
                f"inputs=(Input('orders'),); got {self.inputs!r:.80}."
            )
        if not self.inputs:
            raise ValueError(
                f"{where} needs at least one input: inputs=(Input('orders'),), each a "
                "declared pipeline."
            )
        twice = sorted({n for n in self.input_names if self.input_names.count(n) > 1})
        if twice:
            raise ValueError(f"{where} lists inputs more than once: {twice}.")
        if self.name in self.input_names:
            raise ValueError(f"{where} names itself as an input.")
        for name, value in (("identity", self.identity), ("readers", self.readers)):
            if isinstance(value, str):
                raise TypeError(f"{where}: {name} is a tuple, e.g. {name}=({value!r},).")
        if not self.transform:
            object.__setattr__(self, "transform", self.name)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(i.pipeline for i in self.inputs)

    @property
    def pool(self) -> str:
        """The Airflow pool (one slot) of the pipeline's tasks, as for any pipeline."""
        return f"batch_{self.name}"

    def load_contract(self) -> Contract:
        from data_contracts import load_contract

        return load_contract(self.contract, self.contract_major)

    def readable_by(self, teams: frozenset[str]) -> bool:
        """Whether an identity of ``teams`` may read the table: its owner, its readers and
        the platform's admins may."""
        from pipelines.teams import ADMINS

        return not teams.isdisjoint({self.owner, ADMINS, *self.readers})


def output_days(spec: DerivedSpec, changed: dict[str, Iterable[date]]) -> tuple[date, ...]:
    """The output days that the inputs' changed days (input name -> days) reach.

    >>> from datetime import date
    >>> spec = DerivedSpec("a", "a", 1, (Input("s", reach_days=2), Input("o")), day="d")
    >>> output_days(spec, {"s": [date(2024, 1, 1)], "o": [date(2024, 1, 9)]})
    ... # doctest: +NORMALIZE_WHITESPACE
    (datetime.date(2024, 1, 1), datetime.date(2024, 1, 2), datetime.date(2024, 1, 3),
     datetime.date(2024, 1, 9))
    """
    reach = {i.pipeline: i.reach_days for i in spec.inputs}
    days = {
        day + timedelta(days=k)
        for name, changed_days in changed.items()
        for day in changed_days
        for k in range(reach[name] + 1)
    }
    return tuple(sorted(days))


def input_days(spec: DerivedSpec, name: str, days: Iterable[date]) -> tuple[date, ...]:
    """The days of input ``name`` that building the output's ``days`` reads.

    >>> from datetime import date
    >>> spec = DerivedSpec("a", "a", 1, (Input("s", reach_days=1),), day="d")
    >>> input_days(spec, "s", [date(2024, 1, 5)])
    (datetime.date(2024, 1, 4), datetime.date(2024, 1, 5))
    """
    reach = next(i.reach_days for i in spec.inputs if i.pipeline == name)
    return tuple(sorted({d - timedelta(days=k) for d in days for k in range(reach + 1)}))
