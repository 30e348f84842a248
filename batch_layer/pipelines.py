"""Batch pipelines, each declared once: its topic, contract, views and schedule.

A :class:`PipelineSpec` is all the batch layer and the DAG factory need: the
jobs (``python -m batch_layer --pipeline NAME STEP``) look the spec up by name,
and ``dags/pipelines.py`` turns every spec in :data:`PIPELINES` into its
Airflow DAGs (ingest, views, backfill, maintenance). Adding a pipeline is one
entry here (see ``docs/adding-a-pipeline.md``).

>>> pipeline("web_events").views[0].name
'page_activity'
>>> pipeline("nope")
Traceback (most recent call last):
...
KeyError: "No pipeline 'nope'; the pipelines are: web_events."
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings
from views import VIEWS, ViewSpec

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
    views: tuple[ViewSpec, ...]
    """Views computed over the pipeline's silver events, in both layers."""
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
        names = {v.name: v for v in self.views}
        for rule in self.reconcile:
            if rule.view not in names:
                raise ValueError(
                    f"Pipeline {self.name!r}: reconciliation of unknown view {rule.view!r}."
                )
            names[rule.view].measure(rule.measure)

    def topic_of(self, settings: Settings) -> str:
        return self.topic or settings.kafka.events_topic

    def schedule_of(self, settings: Settings) -> str:
        return self.schedule or settings.batch.schedule

    def table_name(self, settings: Settings) -> str:
        """The Delta table name of the pipeline's bronze and silver (``web.events.v1`` ->
        ``web_events_v1``)."""
        return self.topic_of(settings).replace(".", "_").replace("-", "_")


WEB_EVENTS = PipelineSpec(
    name="web_events",
    contract="web_events",
    contract_major=1,
    views=VIEWS,
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

PIPELINES: tuple[PipelineSpec, ...] = (WEB_EVENTS,)


def pipeline(name: str) -> PipelineSpec:
    """The pipeline called ``name``."""
    for spec in PIPELINES:
        if spec.name == name:
            return spec
    known = ", ".join(spec.name for spec in PIPELINES)
    raise KeyError(f"No pipeline {name!r}; the pipelines are: {known}.")
