"""The platform's Kafka topics, declared as code and created idempotently.

Partitions, replication, retention and ``min.insync.replicas`` come from
:class:`core.settings.KafkaSettings`; production values live in Terraform and
are checked against these declarations.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.settings import KafkaSettings

if TYPE_CHECKING:
    from confluent_kafka.admin import AdminClient

    from pipelines import PipelineSpec

__all__ = [
    "TopicSpec",
    "audit_topic",
    "ensure_topics",
    "pipeline_topics",
    "platform_topics",
    "project_topics",
    "replay_ledger_topic",
]


@dataclass(frozen=True)
class TopicSpec:
    """One topic: name, shape and the topic-level configs it must carry."""

    name: str
    partitions: int
    replication_factor: int
    config: dict[str, str] = field(default_factory=dict)


def platform_topics(kafka: KafkaSettings) -> list[TopicSpec]:
    """The events topic (the retained log both layers read), its dead-letter topic and the
    suppression list (compacted: one record per forgotten user, kept for good)."""
    shared = _log_config(kafka)
    return [
        TopicSpec(
            kafka.events_topic,
            kafka.partitions,
            kafka.replication_factor,
            shared | {"retention.ms": str(kafka.retention_ms)},
        ),
        TopicSpec(
            kafka.dlq_topic,
            kafka.partitions,
            kafka.replication_factor,
            shared | {"retention.ms": _dead_letter_retention_ms(kafka)},
        ),
        TopicSpec(
            kafka.suppressions_topic,
            kafka.partitions,
            kafka.replication_factor,
            shared | {"cleanup.policy": "compact"},
        ),
    ]


def project_topics(
    kafka: KafkaSettings, pipelines: Iterable[PipelineSpec], audit_retention_days: int
) -> list[TopicSpec]:
    """Every topic the platform creates: its own, each pipeline's, the audit's."""
    return [
        *platform_topics(kafka),
        *pipeline_topics(kafka, pipelines),
        audit_topic(kafka, audit_retention_days),
    ]


def audit_topic(kafka: KafkaSettings, retention_days: int) -> TopicSpec:
    """The audit records' topic (:mod:`access.audit`), kept as long as the audit table."""
    retention = str(retention_days * 24 * 3600 * 1000)
    return TopicSpec(
        kafka.audit_topic,
        kafka.partitions,
        kafka.replication_factor,
        _log_config(kafka) | {"retention.ms": retention},
    )


def _log_config(kafka: KafkaSettings) -> dict[str, str]:
    """What every retained log of the platform is configured with."""
    return {
        "min.insync.replicas": str(kafka.min_insync_replicas),
        "cleanup.policy": "delete",
        "compression.type": "producer",
    }


def pipeline_topics(
    kafka: KafkaSettings, pipelines: Iterable[PipelineSpec] = ()
) -> list[TopicSpec]:
    """The topic of every pipeline whose events a service produces straight to Kafka (the
    collector's topic is :func:`platform_topics`'), shaped as its declaration says."""
    shared = _log_config(kafka)
    return [
        TopicSpec(
            kafka.topics.get(spec.name) or spec.topic,
            spec.partitions or kafka.partitions,
            kafka.replication_factor,
            shared | {"retention.ms": str(spec.retention_ms or kafka.retention_ms)},
        )
        for spec in pipelines
        if spec.topic is not None
    ]


def replay_ledger_topic(kafka: KafkaSettings) -> TopicSpec:
    """``<dlq_topic>.replayed``: one record per dead letter replayed, keyed by its position.

    Written by ``python -m ingest replay-dead-letters`` in the transaction that writes the
    replayed event, and created by it when missing. An entry is written after its letter, so
    the dead-letter topic's retention keeps every entry as long as its letter exists.
    """
    return TopicSpec(
        f"{kafka.dlq_topic}.replayed",
        1,
        kafka.replication_factor,
        {
            "min.insync.replicas": str(kafka.min_insync_replicas),
            "cleanup.policy": "compact,delete",
            "compression.type": "producer",
            "retention.ms": _dead_letter_retention_ms(kafka),
        },
    )


def _dead_letter_retention_ms(kafka: KafkaSettings) -> str:
    """Dead letters wait for a human: keep them at least as long as the log, and 30 days."""
    return str(max(kafka.retention_ms, 30 * 24 * 3600 * 1000))


def ensure_topics(
    admin: AdminClient, specs: Iterable[TopicSpec], timeout_s: float = 30
) -> list[str]:
    """Create the topics that do not exist yet; return the names created.

    An existing topic with fewer partitions than declared is an error (Kafka
    cannot shrink, and growing silently would reorder keys).
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    specs = list(specs)
    existing = admin.list_topics(timeout=timeout_s).topics
    _check_partitions(specs, existing)
    missing = [spec for spec in specs if spec.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                config=s.config,
            )
            for s in missing
        ],
        operation_timeout=timeout_s,
    )
    created, raced = [], []
    for name, future in futures.items():
        try:
            future.result()
            created.append(name)
        except KafkaException as error:
            # Created by another process since the listing (a collector and a job starting
            # together): it exists, so it is held to its declared partitions like the rest.
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            raced.append(name)
    listed = _listed(admin, created + raced, timeout_s)
    _check_partitions([s for s in missing if s.name in raced], listed)
    return [spec.name for spec in missing if spec.name in created]


def _listed(admin: AdminClient, names: list[str], timeout_s: float) -> dict:
    """The broker's listing once it shows every topic of ``names`` with a leader for each of
    its partitions.

    A topic just created, by this process or another, can be missing from a broker's
    listing for a moment (its metadata reaches the brokers after the controller answered):
    a check against that listing would pass a topic of any shape, and a client asking that
    broker about it at once is told the topic does not exist.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        topics = admin.list_topics(timeout=timeout_s).topics
        absent = [n for n in names if not _led(topics.get(n))]
        if not absent:
            return topics
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"Topics {absent} were created but no broker listed them with a leader for "
                f"every partition within {timeout_s:.0f}s."
            )
        time.sleep(0.2)


def _led(topic: object | None) -> bool:
    """Whether a listed topic has partitions, each with a leader."""
    partitions = getattr(topic, "partitions", None) or {}
    return bool(partitions) and all(p.leader >= 0 for p in partitions.values())


def _check_partitions(specs: list[TopicSpec], existing: dict) -> None:
    """Refuse a topic that exists with another partition count than declared."""
    for spec in specs:
        if spec.name in existing and len(existing[spec.name].partitions) != spec.partitions:
            raise ValueError(
                f"Topic {spec.name!r} exists with {len(existing[spec.name].partitions)} "
                f"partitions but is declared with {spec.partitions}. Changing the partition "
                "count reorders keyed events; migrate to a new topic instead."
            )
