from __future__ import annotations

import pytest

from core.settings import KafkaSettings
from ingest.topics import platform_topics, replay_ledger_topic


def test_topics_follow_settings():
    kafka = KafkaSettings(
        partitions=6, replication_factor=3, min_insync_replicas=2, retention_ms=3 * 24 * 3600 * 1000
    )
    events, dlq, _ = platform_topics(kafka)
    assert (events.name, events.partitions, events.replication_factor) == ("web.events.v1", 6, 3)
    assert events.config["min.insync.replicas"] == "2"
    assert events.config["retention.ms"] == str(3 * 24 * 3600 * 1000)
    # Dead letters outlive the log so a human can look at them.
    assert int(dlq.config["retention.ms"]) >= int(events.config["retention.ms"])
    assert dlq.name == "web.events.dlq"


def test_the_replay_ledger_is_a_compacted_topic_kept_as_long_as_dead_letters():
    kafka = KafkaSettings(replication_factor=3, min_insync_replicas=2, dlq_topic="d.dlq")
    ledger = replay_ledger_topic(kafka)
    _, dlq, _ = platform_topics(kafka)
    assert (ledger.name, ledger.partitions, ledger.replication_factor) == ("d.dlq.replayed", 1, 3)
    assert ledger.config["cleanup.policy"] == "compact,delete"
    assert ledger.config["retention.ms"] == dlq.config["retention.ms"]
    assert ledger.config["min.insync.replicas"] == "2"


def test_the_suppression_list_is_compacted_and_kept_for_good():
    kafka = KafkaSettings(partitions=6, replication_factor=3, min_insync_replicas=2)
    *_, suppressions = platform_topics(kafka)
    assert suppressions.name == "web.suppressions"
    assert suppressions.config["cleanup.policy"] == "compact"
    assert "retention.ms" not in suppressions.config
    assert (suppressions.partitions, suppressions.replication_factor) == (6, 3)


class _BrokerCatchingUp:
    """An admin client whose topic was created by another process a moment ago: creating
    it is refused as a duplicate, and the first listings do not show it yet."""

    def __init__(self, name: str, partitions: int, unseen_listings: int) -> None:
        self.name, self.partitions, self.unseen = name, partitions, unseen_listings

    def list_topics(self, timeout: float):
        from types import SimpleNamespace

        if self.unseen > 0:
            self.unseen -= 1
            return SimpleNamespace(topics={})
        topic = SimpleNamespace(partitions=dict.fromkeys(range(self.partitions)))
        return SimpleNamespace(topics={self.name: topic})

    def create_topics(self, new_topics, operation_timeout: float):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        futures = {}
        for topic in new_topics:
            futures[topic.topic] = Future()
            futures[topic.topic].set_exception(
                KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
            )
        return futures


def test_a_topic_raced_into_existence_is_checked_once_the_broker_lists_it():
    from ingest.topics import TopicSpec, ensure_topics

    # Two listings after the refused creation still miss it; the third shows 2 partitions.
    admin = _BrokerCatchingUp("clicks", partitions=2, unseen_listings=3)
    with pytest.raises(ValueError, match="exists with 2 partitions but is declared with 3"):
        ensure_topics(admin, [TopicSpec("clicks", 3, 1)], timeout_s=5)
    assert admin.unseen == 0

    same = _BrokerCatchingUp("clicks", partitions=3, unseen_listings=3)
    assert ensure_topics(same, [TopicSpec("clicks", 3, 1)], timeout_s=5) == []


def test_a_raced_topic_no_broker_ever_lists_is_an_error_not_a_pass():
    from ingest.topics import TopicSpec, ensure_topics

    admin = _BrokerCatchingUp("clicks", partitions=2, unseen_listings=10**6)
    with pytest.raises(TimeoutError, match="no broker listed them"):
        ensure_topics(admin, [TopicSpec("clicks", 3, 1)], timeout_s=0.5)
