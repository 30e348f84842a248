from __future__ import annotations

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
