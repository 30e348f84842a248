"""Dead letters replayed after a fix, through the real collector and the local Kafka.

The collector runs with a live horizon of one hour, so events two and three
hours old are dead-lettered as ``invalid:timestamp_too_old``. The horizon is
then raised to a day and ``python -m ingest replay-dead-letters`` is run as an
operator runs it: the events now valid reach the events topic exactly once,
with the collector's key and headers; the others stay where they are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from core.settings import (
    PROJECT_ROOT,
    EventTimeSettings,
    KafkaSettings,
    Settings,
    child_env,
)
from ingest.enrich import format_ts, parse_ts
from tests.support.collector import collector_settings, consume_all, serve_collector

pytestmark = pytest.mark.integration

KEY = "test-write-key-0001"


def _replay(settings: Settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ingest", "replay-dead-letters", *args],
        cwd=PROJECT_ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _report(run: subprocess.CompletedProcess) -> dict:
    assert run.returncode == 0, run.stderr
    logged = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert {"replay.started", "replay.finished"} <= {line["event"] for line in logged}
    return json.loads(run.stdout)


def _event(message_id: str, age: timedelta, now: datetime, **who: str) -> dict:
    return {"type": "page", "messageId": message_id, "timestamp": format_ts(now - age), **who}


def test_dead_letters_replayed_after_a_fix_arrive_once(local_platform, unique_name, kafka_admin):
    strict = collector_settings(local_platform, unique_name, write_keys={"test-site": KEY})
    strict = strict.model_copy(update={"event_time": EventTimeSettings(max_age_s=3600)})
    fixed = strict.model_copy(update={"event_time": EventTimeSettings(max_age_s=24 * 3600)})
    events_topic, dlq_topic = strict.kafka.events_topic, strict.kafka.dlq_topic
    since = format_ts(datetime.now(UTC) - timedelta(minutes=1))
    now = datetime.now(UTC)
    batch = [
        _event("fresh", timedelta(minutes=1), now, anonymousId="u-1"),
        _event("late-1", timedelta(hours=2), now, anonymousId="u-1"),
        _event("late-2", timedelta(hours=3), now, anonymousId="u-2", userId="user-2"),
        _event("ancient", timedelta(days=3), now, anonymousId="u-1"),
        _event("late-nobody", timedelta(hours=2), now),  # too old, and names no user
        _event("nobody", timedelta(minutes=1), now),  # rule:identity: another reason
    ]
    sent_at = format_ts(now)
    try:
        with serve_collector(strict, KEY) as collector:
            answer = httpx.post(
                f"{collector.url}/v1/batch",
                json={"batch": batch, "sentAt": sent_at},
                auth=(KEY, ""),
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["accepted"] == 1
            letters = consume_all(strict, dlq_topic, 5)
            assert sorted(r.key() for r in letters) == [
                b"ancient",
                b"late-1",
                b"late-2",
                b"late-nobody",
                b"nobody",
            ]
            received_at = {r.key(): json.loads(r.value())["received_at"] for r in letters}

            args = ("--reason", "invalid:timestamp_too_old", "--since", since)
            dry = _report(_replay(fixed, *args, "--dry-run"))
            first = _report(_replay(fixed, *args))
            second = _report(_replay(fixed, *args))
            wider = _report(_replay(fixed, "--reason", "invalid:", "--reason", "rule:", *args[2:]))
            events = consume_all(strict, events_topic, 3)
            missing = _replay(
                fixed.model_copy(
                    update={
                        "kafka": KafkaSettings(**(fixed.kafka.model_dump() | {"dlq_topic": "x"}))
                    }
                ),
                *args,
            )
    finally:
        kafka_admin.delete_topics([f"{dlq_topic}.replayed"])

    counts = ("read", "matched", "already_replayed", "now_valid", "produced", "still_invalid")
    still = {"invalid:timestamp_too_old": 1, "rule:identity": 1}
    assert {k: dry[k] for k in counts} | {"dry_run": dry["dry_run"]} == {
        "read": 5,
        "matched": 4,
        "already_replayed": 0,
        "now_valid": 2,
        "produced": 0,
        "still_invalid": still,
        "dry_run": True,
    }
    assert {k: first[k] for k in counts} == {k: dry[k] for k in counts} | {"produced": 2}
    assert {k: second[k] for k in counts} == {
        "read": 5,
        "matched": 4,
        "already_replayed": 2,
        "now_valid": 0,
        "produced": 0,
        "still_invalid": still,
    }
    # Every reason now: the one rule:identity letter is still invalid, nothing is written twice.
    assert (wider["matched"], wider["already_replayed"], wider["produced"]) == (5, 2, 0)
    assert wider["still_invalid"] == {"invalid:timestamp_too_old": 1, "rule:identity": 2}

    # Exactly the two events now valid, once each, as the collector writes events.
    assert sorted(json.loads(r.value())["messageId"] for r in events) == [
        "fresh",
        "late-1",
        "late-2",
    ]
    by_id = {json.loads(r.value())["messageId"]: r for r in events}
    for message_id, key, age in (("late-1", b"u-1", 2), ("late-2", b"user-2", 3)):
        record = by_id[message_id]
        value, headers = json.loads(record.value()), dict(record.headers())
        assert record.key() == key
        assert value["receivedAt"] == received_at[message_id.encode()]
        # receivedAt - (sentAt - timestamp), with the batch-level sentAt the letter kept.
        received = parse_ts(value["receivedAt"], "receivedAt")
        assert value["timestamp"] == format_ts(received - timedelta(hours=age))
        assert (value["source_id"], value["event_id"]) == ("test-site", message_id)
        assert headers["contract"] == b"web-events/1.1.0"
        assert headers["source_id"] == b"test-site"
        assert headers["event_id"] == message_id.encode()
        assert headers["replayed_from"].startswith(f"{dlq_topic}/".encode())
    assert "replayed_from" not in dict(by_id["fresh"].headers())

    assert missing.returncode == 2
    assert "topic x does not exist" in missing.stderr


def test_the_dead_letters_of_a_user_forgotten_since_are_not_sent_again(
    local_platform, unique_name, kafka_admin
):
    from core.suppressions import SuppressionRequest, record_suppression

    strict = collector_settings(local_platform, unique_name, write_keys={"test-site": KEY})
    strict = strict.model_copy(update={"event_time": EventTimeSettings(max_age_s=3600)})
    fixed = strict.model_copy(update={"event_time": EventTimeSettings(max_age_s=24 * 3600)})
    since = format_ts(datetime.now(UTC) - timedelta(minutes=1))
    now = datetime.now(UTC)
    forgotten, their_browser = "forgotten-user-9", "forgotten-browser-9"
    batch = [
        _event("theirs-1", timedelta(hours=2), now, userId=forgotten),
        _event("theirs-2", timedelta(hours=2), now, anonymousId=their_browser),
        _event("kept", timedelta(hours=2), now, anonymousId="someone-else"),
    ]
    try:
        with serve_collector(strict, KEY) as collector:
            answer = httpx.post(
                f"{collector.url}/v1/batch",
                json={"batch": batch, "sentAt": format_ts(now)},
                auth=(KEY, ""),
            )
            assert answer.status_code == 200, answer.text
            assert len(consume_all(strict, strict.kafka.dlq_topic, 3)) == 3
            # Forgotten after the letters were written: both of their ids are on the list.
            for user in (forgotten, their_browser):
                request = SuppressionRequest(user, datetime.now(UTC), f"forget-{user}")
                record_suppression(strict.kafka, request)
            run = _replay(fixed, "--reason", "invalid:timestamp_too_old", "--since", since)
            report = _report(run)
            events = consume_all(strict, strict.kafka.events_topic, 1)
    finally:
        kafka_admin.delete_topics([f"{strict.kafka.dlq_topic}.replayed"])

    assert (report["matched"], report["suppressed"], report["produced"]) == (3, 2, 1)
    assert [json.loads(r.value())["messageId"] for r in events] == ["kept"]
    for user in (forgotten, their_browser):
        assert user not in run.stdout and user not in run.stderr
