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
    """An admin client whose topic was created a moment ago (by another process, unless
    ``ours``: then creating it succeeds): the first listings do not show it yet, the next
    ones show its partitions without a leader, then led."""

    def __init__(
        self, name: str, partitions: int, unseen_listings: int, leaderless: int = 0,
        ours: bool = False,
    ) -> None:  # fmt: skip
        self.name, self.partitions, self.unseen = name, partitions, unseen_listings
        self.leaderless, self.ours, self.created = leaderless, ours, False

    def list_topics(self, timeout: float):
        from types import SimpleNamespace

        if not self.created and self.ours:
            return SimpleNamespace(topics={})
        if self.unseen > 0:
            self.unseen -= 1
            return SimpleNamespace(topics={})
        leader = -1 if self.leaderless > 0 else 0
        self.leaderless -= 1
        partitions = {p: SimpleNamespace(leader=leader) for p in range(self.partitions)}
        return SimpleNamespace(topics={self.name: SimpleNamespace(partitions=partitions)})

    def create_topics(self, new_topics, operation_timeout: float):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        futures = {}
        for topic in new_topics:
            futures[topic.topic] = Future()
            if self.ours:
                self.created = True
                futures[topic.topic].set_result(None)
                continue
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


def test_a_created_topic_is_returned_once_every_partition_has_a_leader():
    """A client asking a broker about a topic before its metadata reached that broker is
    told it does not exist (UNKNOWN_TOPIC_OR_PART): creation waits for the listing."""
    from ingest.topics import TopicSpec, ensure_topics

    admin = _BrokerCatchingUp("clicks", partitions=3, unseen_listings=2, leaderless=2, ours=True)
    assert ensure_topics(admin, [TopicSpec("clicks", 3, 1)], timeout_s=5) == ["clicks"]
    assert (admin.unseen, admin.leaderless) == (0, -1)

    never = _BrokerCatchingUp("clicks", partitions=3, unseen_listings=0, leaderless=10**6,
                              ours=True)  # fmt: skip
    with pytest.raises(TimeoutError, match="leader for every partition"):
        ensure_topics(never, [TopicSpec("clicks", 3, 1)], timeout_s=0.5)
