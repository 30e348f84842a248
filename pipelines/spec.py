"""What a pipeline declaration says: :class:`PipelineSpec` and its parts.

A pipeline is one Kafka topic under one data contract, turned into views by
both layers, served, queryable in SQL and forgettable. This module imports
neither Spark nor Airflow: Airflow's venv imports it to parse the DAGs, the
collector and serving import it without Spark. A spec names its contract and
its views; :mod:`pipelines.registry` checks that they exist.

>>> spec = PipelineSpec(name="orders", contract="orders", contract_major=2,
...                     views=("orders_per_minute",), topic="shop.orders.v2",
...                     arrival=Producer("checkout-service"), identity=("buyer_id",))
>>> spec.pool, spec.topic_version
('batch_orders', 2)
>>> PipelineSpec(name="orders", contract="orders", contract_major=1, views=())
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: Pipeline 'orders' needs at least one view: views=('my_view',), each defined by...
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from data_contracts import Contract
    from views.spec import ViewSpec

__all__ = [
    "Arrival",
    "Collector",
    "PipelineSpec",
    "Producer",
    "Reconciliation",
    "SpeedOptions",
    "topic_table_name",
]

_TOPIC_VERSION = re.compile(r"\.v(\d+)$")


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
class Collector:
    """Events arrive through the collector: Segment/RudderStack SDK calls, validated and
    enriched there, written to the pipeline's topic.

    The collector routes each request by its write key's source
    (``collector.write_keys``: source id -> key): to the pipeline that names the source
    in ``sources``, else to the one pipeline that names none, the collector's default
    (its topic is ``WAP_KAFKA__EVENTS_TOPIC`` unless it declares one). A source that no
    pipeline takes is refused when the collector starts."""

    sources: tuple[str, ...] = ()
    """The collector sources (write keys' source ids) whose events are this pipeline's;
    empty: every source no other pipeline names."""
    kind: str = field(default="collector", init=False)

    def __post_init__(self) -> None:
        if isinstance(self.sources, str) or not all(isinstance(s, str) for s in self.sources):
            raise TypeError(
                f"Collector(sources=...) is a tuple of source ids, e.g. sources=('mobile',); "
                f"got {self.sources!r:.80}."
            )
        twice = sorted({s for s in self.sources if self.sources.count(s) > 1})
        if twice:
            raise ValueError(f"Collector(sources=...) lists sources more than once: {twice}.")

    @property
    def default(self) -> bool:
        """Whether this is the collector's default pipeline (it names no source)."""
        return not self.sources


@dataclass(frozen=True)
class Producer:
    """Events are produced straight to the pipeline's topic by a service of their own
    (with confluent-kafka, idempotent, ``acks=all``), under the pipeline's contract."""

    service: str
    """The producing service, shown to operators (who to call when the topic is quiet)."""
    kind: str = field(default="producer", init=False)


Arrival = Collector | Producer


@dataclass(frozen=True)
class SpeedOptions:
    """How the speed layer streams the pipeline, where it differs from ``WAP_SPEED``."""

    live: bool = True
    """Stream it at all (False: batch views only)."""
    watermark_s: int | None = None
    """Event-time watermark delay; None: ``speed.watermark``."""
    max_offsets_per_trigger: int | None = None
    """Most Kafka records one micro-batch reads; None: ``speed.max_offsets_per_trigger``."""


@dataclass(frozen=True)
class PipelineSpec:
    """One pipeline: a topic under a contract, its views in both layers, its schedule."""

    name: str
    """Identifier: DAG ids, Delta paths, pools, checkpoints and metric labels use it."""
    contract: str
    """Contract folder in ``data_contracts/`` (its schema parses the topic's records)."""
    contract_major: int
    """Major version of the contract; the topic carries one major version."""
    views: tuple[str, ...]
    """Names of the views computed over the pipeline's events, in both layers (each a
    module of ``views/``, resolved by :func:`views.registry.view`)."""
    topic: str | None = None
    """Kafka topic; None: the collector's topic (``WAP_KAFKA__EVENTS_TOPIC``). A name ending
    in ``.v<N>`` must carry the contract's major version N."""
    partitions: int | None = None
    """Partitions of the topic; None: ``kafka.partitions``."""
    retention_ms: int | None = None
    """Retention of the topic (the Kappa replay's horizon); None: ``kafka.retention_ms``."""
    arrival: Arrival = field(default_factory=Collector)
    """How events reach the topic: through the collector, or a producing service."""
    schedule: str | None = None
    """Schedule of the ingest DAG; None: ``settings.batch.schedule``."""
    owner: str = "data-platform"
    """Team answering for the pipeline (on its DAGs, alerts and in ``/v1/views``); it may
    always read the pipeline. A team of :mod:`pipelines.teams`."""
    readers: tuple[str, ...] = ()
    """Other teams that may read the pipeline's views and silver events (SQL, the serving
    API, the dashboard). Besides them only the owner and the platform's admins may."""
    identity: tuple[str, ...] = ()
    """Contract fields that identify a person (top-level string fields): forget erases
    every row where one of them equals the forgotten id. Empty: no personal data."""
    reconcile: tuple[Reconciliation, ...] = ()
    """Silver -> gold row-count reconciliations the quality gate checks."""
    speed: SpeedOptions = field(default_factory=SpeedOptions)
    """The speed layer's options for this pipeline."""

    def __post_init__(self) -> None:
        where = f"Pipeline {self.name!r}"
        if not self.name.isidentifier():
            raise ValueError(f"Pipeline name {self.name!r} must be a plain identifier.")
        if isinstance(self.views, str) or not all(isinstance(v, str) for v in self.views):
            raise TypeError(
                f"{where} lists its views by name, e.g. views=('page_activity',); "
                f"got {self.views!r:.80}."
            )
        if not self.views:
            raise ValueError(
                f"{where} needs at least one view: views=('my_view',), each defined by a "
                "module of views/."
            )
        twice = sorted({n for n in self.views if self.views.count(n) > 1})
        if twice:
            raise ValueError(f"{where} lists views more than once: {twice}.")
        if isinstance(self.identity, str):
            raise TypeError(f"{where}: identity is a tuple of fields, e.g. ('buyer_id',).")
        if isinstance(self.readers, str):
            raise TypeError(f"{where}: readers is a tuple of teams, e.g. ('marketing',).")
        for rule in self.reconcile:
            if rule.view not in self.views:
                raise ValueError(f"{where}: reconciliation of unknown view {rule.view!r}.")
        version = self.topic_version
        if version is not None and version != self.contract_major:
            raise ValueError(
                f"{where}: topic {self.topic!r} carries major version {version} but the "
                f"contract is {self.contract} v{self.contract_major}. A topic carries one "
                f"major version: name it '...v{self.contract_major}' or declare the "
                "contract version it carries."
            )

    @property
    def topic_version(self) -> int | None:
        """The major version the topic's name carries (``shop.orders.v2`` -> 2), if any."""
        found = _TOPIC_VERSION.search(self.topic or "")
        return int(found.group(1)) if found else None

    def load_contract(self) -> Contract:
        """The declared contract, loaded (once: the loader keeps it): the schema that parses
        the pipeline's records and the key that deduplicates them."""
        from data_contracts import load_contract

        return load_contract(self.contract, self.contract_major)

    @property
    def view_specs(self) -> tuple[ViewSpec, ...]:
        """The pipeline's views, resolved by name in :mod:`views.registry`."""
        from views.registry import view

        return tuple(view(name) for name in self.views)

    def validate(self) -> PipelineSpec:
        """``self``, once its views resolve and every reconciliation sums a count measure.

        >>> from pipelines import pipeline
        >>> pipeline("web_events").validate().name
        'web_events'
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

    def readable_by(self, teams: frozenset[str]) -> bool:
        """Whether an identity of ``teams`` may read the pipeline: its owner, its readers
        and the platform's admins may.

        >>> from pipelines import pipeline
        >>> checkouts = pipeline("checkouts")
        >>> checkouts.readable_by(frozenset({"shop-data"})), checkouts.readable_by(frozenset())
        (True, False)
        """
        from pipelines.teams import ADMINS

        return not teams.isdisjoint({self.owner, ADMINS, *self.readers})

    @property
    def pool(self) -> str:
        """The Airflow pool (one slot) every task of the pipeline's DAGs runs in: its
        ingest, views, backfill and maintenance DAGs run steps on the same tables."""
        return f"batch_{self.name}"

    def topic_of(self, settings: Settings) -> str:
        """The topic read and written: ``kafka.topics[name]`` when set, else the declared one,
        else the collector's."""
        return settings.kafka.topics.get(self.name) or self.topic or settings.kafka.events_topic

    def partitions_of(self, settings: Settings) -> int:
        return self.partitions or settings.kafka.partitions

    def schedule_of(self, settings: Settings) -> str | None:
        return self.schedule or settings.batch.schedule

    def stream_settings(self, settings: Settings) -> Settings:
        """``settings`` as the speed layer streams this pipeline: its topic, its runs and
        checkpoints under ``<speed.checkpoint_name>/<name>`` (``speed_runs`` is keyed by
        that), and its own watermark and micro-batch bound where it declares them.

        >>> from pipelines import pipeline
        >>> s = pipeline("checkouts").stream_settings(Settings())
        >>> s.speed.checkpoint_name, s.kafka.events_topic
        ('speed/checkouts', 'shop.checkouts.v1')
        """
        speed: dict[str, object] = {
            "checkpoint_name": f"{settings.speed.checkpoint_name}/{self.name}"
        }
        if self.speed.watermark_s is not None:
            speed["watermark"] = f"{self.speed.watermark_s} seconds"
        if self.speed.max_offsets_per_trigger is not None:
            speed["max_offsets_per_trigger"] = self.speed.max_offsets_per_trigger
        return settings.model_copy(
            update={
                "speed": settings.speed.model_copy(update=speed),
                "kafka": settings.kafka.model_copy(
                    update={"events_topic": self.topic_of(settings)}
                ),
            }
        )

    def table_name(self, settings: Settings) -> str:
        """The Delta table name of the pipeline's bronze and silver (``web.events.v1`` ->
        ``web_events_v1``)."""
        return topic_table_name(self.topic_of(settings))


def topic_table_name(topic: str) -> str:
    """A topic's name as a table name: ``web.events.v1`` -> ``web_events_v1``.

    >>> topic_table_name("shop.checkouts-eu.v1")
    'shop_checkouts_eu_v1'
    """
    return topic.replace(".", "_").replace("-", "_")
