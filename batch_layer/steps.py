"""The batch layer's steps, as one table, and the sequences they run in.

Each :class:`Step` is a record: what it runs (a function of a :class:`StepCall`,
importing its module only when it runs), the modules it needs (the step server
imports them before it serves), whether it decides (a quality gate or the
layers' reconciliation: the DAGs never retry one, a retry would decide on
nothing new), the asset its success updates, and whether it takes a person.
The command line (:mod:`batch_layer.cli`), the runner (:mod:`batch_layer.runner`),
the step server, the DAG factory, ``platformctl forget`` and the benchmarks
all read this table: a step is added here, once. Importable without Spark or
Airflow (the DAGs are parsed in Airflow's own environment).

>>> INGEST + VIEWS == ALL
True
>>> [s for s in ALL if STEPS[s].decides]
['check_silver', 'check_gold', 'reconcile']
>>> STEPS["forget"].person, STEPS["publish"].outlet
(True, 'boundary')
>>> [s.name for s in STEPS.values() if "derived" in s.kinds]
['optimize', 'vacuum', 'derive']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from core.settings import Settings
    from pipelines import PipelineSpec

__all__ = [
    "ALL",
    "DERIVED",
    "DERIVED_MAINTENANCE",
    "FORGET",
    "INGEST",
    "MAINTENANCE",
    "SEQUENCES",
    "STEPS",
    "THROUGH_PUBLISH",
    "VIEWS",
    "Asset",
    "Step",
    "StepCall",
]

Asset = Literal["silver", "gold", "boundary", "table"]
"""What a step's success publishes: the pipeline's silver, its gold, its batch boundary,
a derived pipeline's table (the DAGs' Airflow assets; the views DAG runs when silver is
updated, a derived pipeline's DAG when any of its inputs' silver or table is)."""


@dataclass(frozen=True)
class StepCall:
    """One step's arguments: the session, the settings, the pipeline and the run."""

    spark: Any
    settings: Settings
    spec: PipelineSpec
    run_id: str
    dates: list[date] | None = None
    """Days silver reprocesses from bronze (a backfill); None: what the ledger holds."""
    user: str | None = None
    """The person to forget (``forget`` only)."""
    scope: Literal["everywhere", "pipeline"] = "everywhere"


Kind = Literal["pipeline", "derived"]
"""Which declarations a step runs for: a pipeline over a topic (:class:`PipelineSpec`) or
a pipeline over pipelines (:class:`~pipelines.DerivedSpec`)."""


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[StepCall], Any]
    modules: tuple[str, ...]
    decides: bool = False
    """A gate or the reconciliation: a failure is a verdict (exit 3 or 4), not retried."""
    outlet: Asset | None = None
    person: bool = False
    """Takes ``--user``: the person it acts for."""
    kinds: tuple[Kind, ...] = ("pipeline",)
    """The declarations it runs for."""


def _forget(c: StepCall) -> Any:
    from batch_layer.forget import forget

    if not c.user:
        raise ValueError("The forget step needs the user to forget: --user ID.")
    return forget(c.spark, c.settings, c.spec, c.user, c.run_id, everywhere=c.scope == "everywhere")


def _bronze(c: StepCall) -> Any:
    from batch_layer.bronze import ingest_bronze

    return ingest_bronze(c.spark, c.settings, c.spec)


def _silver(c: StepCall) -> Any:
    from batch_layer.silver import build_silver

    return build_silver(c.spark, c.settings, c.dates, spec=c.spec, run_id=c.run_id)


def _check_silver(c: StepCall) -> Any:
    from batch_layer.quality import check_silver

    return check_silver(c.spark, c.settings, c.spec, c.run_id)


def _gold(c: StepCall) -> Any:
    from batch_layer.gold import build_gold

    return build_gold(c.spark, c.settings, spec=c.spec, run_id=c.run_id)


def _check_gold(c: StepCall) -> Any:
    from batch_layer.quality import check_gold

    return check_gold(c.spark, c.settings, c.spec, c.run_id)


def _publish(c: StepCall) -> Any:
    from batch_layer.publish import publish

    return publish(c.spark, c.settings, c.spec, c.run_id)


def _reconcile(c: StepCall) -> Any:
    from batch_layer.reconcile import reconcile

    return reconcile(c.spark, c.settings, c.spec, c.run_id)


def _optimize(c: StepCall) -> Any:
    from batch_layer.maintenance import optimize

    return optimize(c.spark, c.settings, c.spec)


def _vacuum(c: StepCall) -> Any:
    from batch_layer.maintenance import vacuum

    return vacuum(c.spark, c.settings, c.spec)


def _derive(c: StepCall) -> Any:
    from batch_layer.derive import build_derived

    return build_derived(c.spark, c.settings, c.spec, c.run_id, c.dates)  # type: ignore[arg-type]


def _drop_superseded(c: StepCall) -> Any:
    from batch_layer.maintenance import drop_superseded

    return drop_superseded(c.settings, c.spec)


_BOTH: tuple[Kind, ...] = ("pipeline", "derived")
_GATE_LIBRARIES = ("data_contracts.derive", "data_contracts.derive.one_pass_query")

STEPS: dict[str, Step] = {
    step.name: step
    for step in (
        Step("bronze", _bronze, ("batch_layer.bronze", "confluent_kafka")),
        Step("silver", _silver, ("batch_layer.silver",)),
        Step(
            "check_silver",
            _check_silver,
            ("batch_layer.quality", "great_expectations", *_GATE_LIBRARIES),
            decides=True,
            outlet="silver",
        ),
        Step("gold", _gold, ("batch_layer.gold",)),
        Step(
            "check_gold",
            _check_gold,
            ("batch_layer.quality", "great_expectations", *_GATE_LIBRARIES),
            decides=True,
            outlet="gold",
        ),
        Step(
            "publish", _publish, ("batch_layer.publish", "cassandra.concurrent"), outlet="boundary"
        ),
        Step("reconcile", _reconcile, ("batch_layer.reconcile",), decides=True),
        Step("optimize", _optimize, ("batch_layer.maintenance", "delta.tables"), kinds=_BOTH),
        Step("vacuum", _vacuum, ("batch_layer.maintenance", "delta.tables"), kinds=_BOTH),
        Step("drop_superseded", _drop_superseded, ("batch_layer.maintenance",)),
        Step("forget", _forget, ("batch_layer.forget", "delta.tables"), person=True),
        Step(
            "derive",
            _derive,
            ("batch_layer.derive", "great_expectations", *_GATE_LIBRARIES),
            decides=True,
            outlet="table",
            kinds=("derived",),
        ),
    )
}
"""Every step, by name."""

INGEST = ("bronze", "silver", "check_silver")
"""Kafka -> bronze -> silver, gated (the ingest DAG)."""
VIEWS = ("gold", "check_gold", "publish", "reconcile")
"""Silver -> gold -> the published views and boundary, reconciled (the views DAG)."""
ALL = (*INGEST, *VIEWS)
"""A whole run (``python -m batch_layer all``; the backfill DAG, silver given its days)."""
THROUGH_PUBLISH = ALL[: ALL.index("publish") + 1]
"""A run up to its publish, without the reconciliation (no speed rows to compare)."""
MAINTENANCE = ("optimize", "vacuum", "drop_superseded")
FORGET = ("forget", "check_silver", "gold", "check_gold", "publish")
"""Forgetting a person, then the gated path that republishes the days it touched."""

DERIVED = ("derive",)
"""A derived pipeline's days rebuilt from its inputs, gated, written (its build DAG)."""
DERIVED_MAINTENANCE = ("optimize", "vacuum")
"""A derived pipeline's table and ledger compacted, and vacuumed: the files a rebuild after
a forget replaced are deleted here."""

SEQUENCES: dict[str, tuple[str, ...]] = {
    "ingest": INGEST,
    "views": VIEWS,
    "all": ALL,
    "maintenance": MAINTENANCE,
    "forget": FORGET,
    "derived": DERIVED,
    "derived_maintenance": DERIVED_MAINTENANCE,
}
"""The named sequences (``all`` is also a step argument of the command line)."""
