"""Batch pipelines, each declared once: its topic, contract, views and schedule.

A :class:`PipelineSpec` is all the batch layer and the DAG factory need: the
jobs (``python -m batch_layer --pipeline NAME STEP``) look the spec up by name,
and ``dags/pipelines.py`` turns every spec in :data:`PIPELINES` into its
Airflow DAGs (ingest, views, backfill, maintenance). Adding a pipeline is one
entry here (see ``docs/adding-a-pipeline.md``).

This module imports no Spark code: Airflow's venv imports it to parse the
DAGs. A spec names its views; :attr:`PipelineSpec.view_specs` resolves them
in :mod:`views.registry` (whose modules import pyspark) when a job needs them,
and :meth:`PipelineSpec.validate` checks what needs the views' measures.

>>> pipeline("web_events").views[0]
'page_activity'
>>> pipeline("nope")
Traceback (most recent call last):
...
KeyError: "No pipeline 'nope'; the pipelines are: web_events."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from views.spec import ViewSpec

__all__ = ["PIPELINES", "WEB_EVENTS", "PipelineSpec", "Reconciliation", "pipeline"]


@dataclass(frozen=True)
class Reconciliation:
    """A gold total that must equal a count of silver rows over the same days.

    The quality gate checks ``sum(view.measure) == count(silver WHERE silver_where)``
    per run: nothing was lost or counted twice between silver and gold.
    """

    view: str
    measure: str
    silver_where: str = "true"
    """Spark SQL predicate on silver rows (``true``: all of them)."""


@dataclass(frozen=True)
class PipelineSpec:
    """One Kafka topic reprocessed into silver and gold views on a schedule."""

    name: str
    """Identifier: DAG ids, Delta paths and Cassandra rows are named after it."""
    contract: str
    """Contract id in ``data_contracts/`` (its schema parses the topic's records)."""
    contract_major: int
    """Major version of the contract; the topic carries one major version."""
    views: tuple[str, ...]
    """Names of the views computed over the pipeline's silver events, in both layers
    (each resolved by :func:`views.registry.view`)."""
    topic: str | None = None
    """Kafka topic; None means the events topic from settings (``WAP_KAFKA__EVENTS_TOPIC``)."""
    schedule: str | None = None
    """Schedule of the ingest DAG; None means ``settings.batch.schedule``."""
    reconcile: tuple[Reconciliation, ...] = ()
    """Silver -> gold row-count reconciliations the quality gate checks."""
    owner: str = "data-platform"
    """Team answering for the pipeline (shown on the DAGs)."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier():
            raise ValueError(f"Pipeline name {self.name!r} must be a plain identifier.")
        if not self.views:
            raise ValueError(f"Pipeline {self.name!r} needs at least one view.")
        if isinstance(self.views, str) or not all(isinstance(v, str) for v in self.views):
            raise TypeError(
                f"Pipeline {self.name!r} lists its views by name, e.g. "
                f"views=('page_activity',); got {self.views!r:.80}."
            )
        twice = sorted({n for n in self.views if self.views.count(n) > 1})
        if twice:
            raise ValueError(f"Pipeline {self.name!r} lists views more than once: {twice}.")
        for rule in self.reconcile:
            if rule.view not in self.views:
                raise ValueError(
                    f"Pipeline {self.name!r}: reconciliation of unknown view {rule.view!r}."
                )

    @property
    def view_specs(self) -> tuple[ViewSpec, ...]:
        """The pipeline's views, resolved by name in :mod:`views.registry`.

        Imported here, not with this module: the view modules import pyspark.

        >>> [spec.keys for spec in WEB_EVENTS.view_specs][:2]
        [('path',), ('site',)]
        """
        from views.registry import view

        return tuple(view(name) for name in self.views)

    def validate(self) -> PipelineSpec:
        """``self``, once its views resolve and every reconciliation sums a count measure.

        Needs the views' specs, so the jobs call it before they run; parsing
        the DAGs does not.

        >>> WEB_EVENTS.validate() is WEB_EVENTS
        True
        """
        specs = dict(zip(self.views, self.view_specs, strict=True))
        for rule in self.reconcile:
            measure = specs[rule.view].measure(rule.measure)
            if measure.kind != "count":
                raise ValueError(
                    f"Pipeline {self.name!r}: reconciliation of {rule.view}.{rule.measure}, "
                    f"a {measure.kind} measure; only a count can equal a number of silver rows."
                )
        return self

    @property
    def pool(self) -> str:
        """The Airflow pool (one slot) every task of the pipeline's DAGs runs in.

        The ingest, views, backfill and maintenance DAGs run the same steps on
        the same tables and ledger; one slot runs them one at a time.

        >>> WEB_EVENTS.pool
        'batch_web_events'
        """
        return f"batch_{self.name}"

    def topic_of(self, settings: Settings) -> str:
        return self.topic or settings.kafka.events_topic

    def schedule_of(self, settings: Settings) -> str | None:
        return self.schedule or settings.batch.schedule

    def table_name(self, settings: Settings) -> str:
        """The Delta table name of the pipeline's bronze and silver (``web.events.v1`` ->
        ``web_events_v1``)."""
        from layout.lake import topic_table_name  # here: parsing the DAGs imports no views

        return topic_table_name(self.topic_of(settings))


WEB_EVENTS = PipelineSpec(
    name="web_events",
    contract="web_events",
    contract_major=1,
    views=("page_activity", "site_activity", "search_terms", "clicks"),
    reconcile=(
        Reconciliation("site_activity", "events"),
        Reconciliation("site_activity", "page_views", "type = 'page'"),
        Reconciliation(
            "page_activity",
            "page_views",
            "type = 'page' AND coalesce(properties.path, context.page.path) IS NOT NULL",
        ),
    ),
)


def _check_pipelines(pipelines: tuple[PipelineSpec, ...]) -> tuple[PipelineSpec, ...]:
    """``pipelines``, once their names and their views' names are unique.

    A pipeline's name names its DAGs and its ledger; a view's name names its
    gold table (``gold/<view>``) and its Cassandra batch tables
    (``batch_<view>``), so two pipelines declaring one view would overwrite
    each other's rows.
    """
    names = [spec.name for spec in pipelines]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"Pipelines declared more than once: {twice}; rename one of each.")
    declared: dict[str, list[str]] = {}
    for spec in pipelines:
        for view in spec.views:
            declared.setdefault(view, []).append(spec.name)
    shared = [f"{v!r} (pipelines {', '.join(p)})" for v, p in declared.items() if len(p) > 1]
    if shared:
        raise ValueError(
            f"Views declared by more than one pipeline: {'; '.join(shared)}. gold/<view> and "
            "the Cassandra batch_<view> tables are named after the view: keep each view in "
            "one pipeline."
        )
    return pipelines


PIPELINES: tuple[PipelineSpec, ...] = _check_pipelines((WEB_EVENTS,))


def pipeline(name: str) -> PipelineSpec:
    """The pipeline called ``name``."""
    for spec in PIPELINES:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in PIPELINES)
    raise KeyError(f"No pipeline {name!r}; the pipelines are: {known}.")
