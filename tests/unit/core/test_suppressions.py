"""The suppression list's pure parts: its records, and which events it suppresses."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest
from pydantic import SecretStr

from core.suppressions import SuppressionRequest, Suppressions, is_suppressed, subject_of

NOW = datetime(2026, 11, 23, 14, tzinfo=UTC)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "page", "userId": "u-1"},
        {"type": "page", "anonymousId": "u-1"},
        {"type": "track", "userId": "someone-else", "anonymousId": "u-1"},
        {"type": "identify", "userId": "u-1", "anonymousId": "a-1"},
    ],
)
def test_an_event_is_suppressed_by_its_user_id_or_its_anonymous_id(event):
    assert is_suppressed(event, {"u-1"})


@pytest.mark.parametrize(
    "event",
    [
        {"type": "page", "userId": "u-10", "anonymousId": "a-1"},  # not a prefix match
        {"type": "alias", "userId": "u-2", "previousId": "u-1"},  # only the two identity fields
        {"type": "page", "properties": {"userId": "u-1"}},  # a property is not the identity
        {"type": "page", "userId": None, "anonymousId": ""},
        ["u-1"],
        "u-1",
        None,
    ],
)
def test_other_events_and_values_are_not(event):
    assert not is_suppressed(event, {"u-1", ""})


def test_a_numeric_user_id_matches_its_text_but_a_boolean_does_not():
    assert is_suppressed({"userId": 123}, {"123"})
    assert not is_suppressed({"userId": True}, {"True", "1"})


def test_an_empty_list_suppresses_nothing():
    assert not is_suppressed({"userId": "u-1"}, set())


def test_the_record_is_keyed_by_the_id_and_carries_the_request():
    key, value = SuppressionRequest("u-1", NOW, "forget__r1").record()
    assert key == b"u-1"
    assert json.loads(value) == {
        "id": "u-1",
        "requested_at": "2026-11-23T14:00:00+00:00",
        "request_id": "forget__r1",
        "pipeline": None,
    }


@pytest.mark.parametrize("user_id", ["", "   ", None, 42])
def test_a_request_needs_a_non_empty_text_id(user_id):
    with pytest.raises(ValueError, match="non-empty string"):
        SuppressionRequest(user_id, NOW, "r")


def test_a_request_needs_an_aware_time():
    with pytest.raises(ValueError, match="time zone"):
        SuppressionRequest("u-1", datetime(2026, 1, 1), "r")


def test_records_add_ids_and_a_tombstone_lifts_one():
    ids = Suppressions()
    ids.apply(b"u-1", b"{}")
    ids.apply(b"u-2", b"{}")
    ids.apply(b"u-1", b"{}")  # compaction may not have run yet: a repeat changes nothing
    ids.apply(None, b"{}")  # a record without a key names nobody
    assert ids.everywhere == {"u-1", "u-2"}
    ids.apply(b"u-1", None)
    assert ids.everywhere == {"u-2"}


def test_a_person_forgotten_in_one_pipeline_is_kept_by_the_others():
    """Finding 5 of the pipelines' isolation: one global list: a forget in checkouts also
    dropped web events of the same id at the collector and in every later rebuild."""
    ids = Suppressions()
    scoped = SuppressionRequest("42", NOW, "forget-1", pipeline="checkouts")
    ids.apply(*scoped.record())
    everywhere = SuppressionRequest("7", NOW, "forget-2")
    ids.apply(*everywhere.record())
    assert ids.of("checkouts") == {"42", "7"}
    assert ids.of("web_events") == {"7"}
    assert ids.of("a_pipeline_added_later") == {"7"}
    assert not is_suppressed({"userId": "42"}, ids.of("web_events"))
    assert is_suppressed({"buyer_id": "42"}, ids.of("checkouts"), ("buyer_id",))
    # The same id forgotten in two pipelines: two records, neither replaces the other.
    ids.apply(*SuppressionRequest("42", NOW, "forget-3", pipeline="web_events").record())
    assert ids.of("web_events") == {"42", "7"} and ids.of("checkouts") == {"42", "7"}


def test_the_collector_checks_a_pipelines_own_identity_fields():
    """Finding 5: the collector's check hard-coded userId and anonymousId; a pipeline whose
    contract names people by another field kept accepting a forgotten person's events."""
    assert not is_suppressed({"userId": "x", "device": {"owner": "d-1"}}, {"d-1"})
    assert is_suppressed({"userId": "x", "device": {"owner": "d-1"}}, {"d-1"}, ("device.owner",))


def test_the_subject_is_a_stable_digest_not_the_id():
    key = SecretStr("a-key-of-thirty-two-characters!!")
    assert subject_of("u-1", key) == subject_of("u-1", key) != subject_of("u-2", key)
    assert "u-1" not in subject_of("u-1", key)
    # Keyed: whoever holds candidate ids but not the key cannot match the digest.
    assert subject_of("u-1", SecretStr("another-key-of-thirty-two-chars!")) != subject_of(
        "u-1", key
    )
    unkeyed = hashlib.sha256(b"u-1").hexdigest()
    assert unkeyed[:16] not in subject_of("u-1", key)
