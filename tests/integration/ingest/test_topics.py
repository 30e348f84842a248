"""Topics as code against the real broker: creating them is safe when another process
creates them at the same moment."""

from __future__ import annotations

import pytest

from ingest.topics import TopicSpec, ensure_topics

pytestmark = pytest.mark.integration


class _ListedBefore:
    """The broker's admin client, whose topic listing was taken before another process
    created the topics (the race between a listing and a creation, made certain)."""

    def __init__(self, admin) -> None:
        self.admin = admin
        self.listing = admin.list_topics(timeout=30)

    def list_topics(self, timeout: float):
        listing, self.listing = self.listing, None
        return listing if listing is not None else self.admin.list_topics(timeout=timeout)

    def create_topics(self, *args, **kwargs):
        return self.admin.create_topics(*args, **kwargs)


def test_a_topic_created_by_another_process_meanwhile_is_not_an_error(kafka_admin, unique_name):
    name = unique_name.replace("_", "-")
    declared, other = TopicSpec(name, 2, 1), TopicSpec(name, 3, 1)
    late, late_and_other = _ListedBefore(kafka_admin), _ListedBefore(kafka_admin)
    try:
        assert ensure_topics(kafka_admin, [declared]) == [name]
        assert ensure_topics(late, [declared]) == []  # created meanwhile: nothing to do
        # ... and still held to the partitions it is declared with.
        with pytest.raises(ValueError, match="exists with 2 partitions but is declared with 3"):
            ensure_topics(late_and_other, [other])
    finally:
        kafka_admin.delete_topics([name])
