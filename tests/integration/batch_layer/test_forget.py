"""Forgetting a user on the real stack: Kafka, Spark, Delta, Cassandra and the collector.

The pipeline runs on simulated traffic; one known user is forgotten with the
steps ``platformctl forget`` runs in-process (forget, the silver gate, gold,
the gold gate, publish). Then no bronze, silver, rejects or gold row holds
the id, raw values included; the published views equal the ground truth of
the same traffic without that user; later runs, a backfill and a replay of
the log into a new lake leave the user out; and the collector drops the
user's new events while another user's go through.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from datetime import UTC, datetime

import httpx
import pytest
from pyspark.sql import functions as F

from batch_layer.bronze import bronze_path
from batch_layer.runner import run_step, run_steps
from batch_layer.silver import rejects_path, silver_path
from batch_layer.steps import FORGET, THROUGH_PUBLISH
from batch_layer.tables import BRONZE_PROPERTIES, REJECTS_PROPERTIES, silver_properties
from core.settings import LakeSettings, Settings
from data_contracts import load_contract
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct, produce_payloads
from tests.support.collector import collector_settings, consume_all, serve_collector
from tests.support.operator import operator
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

AUTH = ("test-write-key-0001", "")


def _theirs(user: str):
    def match(payload) -> bool:
        return isinstance(payload, dict) and user in (
            payload.get("userId"),
            payload.get("anonymousId"),
        )

    return match


def _holding(spark, settings: Settings, user: str) -> dict[str, int]:
    """Rows of each lake table whose text (raw values, payloads, every column) holds ``user``."""
    from batch_layer.gold import gold_path

    tables = {
        "bronze": bronze_path(settings, WEB_EVENTS),
        "silver": silver_path(settings, WEB_EVENTS),
        "rejects": rejects_path(settings, WEB_EVENTS),
        **{f"gold/{v.name}": gold_path(settings, v) for v in WEB_EVENTS.view_specs},
    }
    found = {}
    for name, path in tables.items():
        frame = spark.read.format("delta").load(path)
        text = F.concat_ws(
            "\u0001",
            *(F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("")) for c in frame.columns),
        )
        found[name] = frame.where(F.instr(text, F.lit(user)) > 0).count()
    return found


def _columns_with_statistics(path: str) -> set[str]:
    """Every column (nested ones by their dotted path) some file of the Delta table at
    ``path`` has minima or maxima for, in any commit of its transaction log."""
    from pathlib import Path

    def leaves(values: dict, prefix: str = "") -> set[str]:
        out: set[str] = set()
        for name, value in values.items():
            out |= leaves(value, f"{prefix}{name}.") if isinstance(value, dict) else {prefix + name}
        return out

    found: set[str] = set()
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add") or {}
            stats = json.loads(add.get("stats") or "{}")
            found |= leaves(stats.get("minValues", {})) | leaves(stats.get("maxValues", {}))
    return found


def _rejected_record(user: str) -> bytes:
    """A value silver rejects (no event_id, no timestamp) that still names ``user``."""
    return json.dumps({"type": "page", "userId": user, "properties": {"path": "/r"}}).encode()


def _produce_raw(settings: Settings, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer(settings.kafka.client_config())
    for value in values:
        producer.produce(settings.kafka.events_topic, value=value)
    assert producer.flush(30) == 0


def test_a_forgotten_user_is_gone_from_every_layer_and_stays_gone(
    spark, pipeline_settings, run_pipeline, gold_page_views, published_view, tmp_path
):
    settings = pipeline_settings
    keyspace = settings.cassandra.keyspace
    events = generate(
        SimulatorConfig(
            seed=33,
            events=1500,
            rate=0.04,  # about ten hours of traffic, across a day boundary
            start=datetime(2024, 3, 1, 19, tzinfo=UTC),
            users=120,
            duplicate_rate=0.05,
            late_rate=0.05,
            late_by_s=3600,
            invalid_rate=0.02,
        )
    )
    # The known user with the most events is forgotten; anonymous ones stay.
    counts = Counter(
        e.payload.get("userId") for e in events if isinstance(e.payload, dict) and e.defect is None
    )
    user = max((u for u in counts if u), key=lambda u: counts[u])
    theirs = _theirs(user)
    other = next(u for u in counts if u and u != user)
    truth_without = build_truth(e for e in events if not theirs(e.payload))
    produce_direct(events, settings)
    _produce_raw(settings, [_rejected_record(user), _rejected_record(other)])

    first = run_pipeline(settings, "run-1")
    assert first["check_silver"].passed and first["check_gold"].passed
    before = _holding(spark, settings, user)
    assert before["bronze"] > before["silver"] > 0 and before["rejects"] == 1
    silver = spark.read.format("delta").load(silver_path(settings, WEB_EVENTS))
    their_days = {r.event_date for r in silver.where(F.col("userId") == user).collect()}
    assert their_days

    started = time.monotonic()
    summary, code = run_steps(spark, settings, FORGET, WEB_EVENTS, "forget-1", user=user)
    wall = time.monotonic() - started
    assert code == 0, summary
    report = summary["steps"]["forget"]["result"]
    print(f"\n[forget] {wall:.1f}s for all steps; forget step report: {json.dumps(report)}")
    assert user not in json.dumps(summary, default=str)  # reports name a digest, not the id
    assert set(report["days"]) == {d.isoformat() for d in their_days}
    assert report["tables"]["silver"]["rows_deleted"] == before["silver"]
    assert report["tables"]["bronze"]["rows_deleted"] == before["bronze"]
    assert report["tables"]["rejects"]["rows_deleted"] == 1
    for table in ("bronze", "silver", "rejects"):
        # A file holding only their rows is removed by the erasing MERGE; others get a
        # deletion vector, and REORG's purge rewrites them (no REORG commit when there is none).
        assert report["tables"][table]["operations"][0] == "MERGE"
        assert report["tables"][table]["files_removed"] >= 1
    # The tables' history names neither the id nor a digest anyone could match to it: the
    # erasing commits' predicates name columns, their metadata a keyed digest.
    guessable = (user, hashlib.sha256(user.encode()).hexdigest()[:16])
    for path in (
        bronze_path(settings, WEB_EVENTS),
        silver_path(settings, WEB_EVENTS),
        rejects_path(settings, WEB_EVENTS),
    ):
        history = json.dumps(
            [r.asDict(recursive=True) for r in spark.sql(f"DESCRIBE HISTORY delta.`{path}`")
             .select("operation", "operationParameters", "userMetadata").collect()]
        )  # fmt: skip
        assert "MERGE" in history and not any(g in history for g in guessable), path
    # Nor do the logs' file statistics: silver's and the rejects' are kept on columns that
    # hold no id (bronze's on its Kafka coordinates and times). The erasure turned on
    # deletion vectors and left each table's own properties as its step set them.
    key = load_contract(WEB_EVENTS.contract, WEB_EVENTS.contract_major).key
    assert _columns_with_statistics(silver_path(settings, WEB_EVENTS)) == {
        "partition", "offset", "event_time", "receivedAt", *key
    }  # fmt: skip
    assert _columns_with_statistics(rejects_path(settings, WEB_EVENTS)) <= {
        "partition", "offset", "reason"
    }  # fmt: skip
    for path, own in (
        (bronze_path(settings, WEB_EVENTS), BRONZE_PROPERTIES),
        (silver_path(settings, WEB_EVENTS), silver_properties(key)),
        (rejects_path(settings, WEB_EVENTS), REJECTS_PROPERTIES),
    ):
        properties = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first().properties
        wanted = own | {"delta.enableDeletionVectors": "true"}
        assert {k: properties.get(k) for k in wanted} == wanted, path
    published_days = summary["steps"]["publish"]["result"]["days"]
    assert [d.isoformat() for d in published_days] == sorted(report["days"])

    # No row holds the id, raw values and payloads included; the other user's reject stays.
    assert set(_holding(spark, settings, user).values()) == {0}
    # Nor does any file of the tables' current versions, read as plain Parquet (deletion
    # vectors ignored): the purge rewrote them.
    for path in (bronze_path(settings, WEB_EVENTS), silver_path(settings, WEB_EVENTS)):
        files = spark.read.format("delta").load(path).inputFiles()
        raw = spark.read.parquet(*files)
        text = F.concat_ws("\u0001", *(F.col(f"`{c}`").cast("string") for c in raw.columns))
        assert raw.where(F.instr(text, F.lit(user)) > 0).count() == 0, path
    assert _holding(spark, settings, other)["rejects"] == 1
    # Gold and what serving reads equal the ground truth of the traffic without the user.
    assert gold_page_views(settings) == truth_without.page_views
    assert published_view(keyspace) == truth_without.page_views
    site_events = published_view(keyspace, "site_activity", "events")
    assert {m: v["all"] for m, v in site_events.items()} == truth_without.events_per_minute

    # Their events still in the log or arriving late come back through no rebuild: a new
    # ingest run, a backfill of their days, and a replay of the whole log into a new lake.
    late = [e for e in events if theirs(e.payload) and e.defect is None][:5]
    produce_payloads([(e.payload, e.sent_at) for e in late], settings)
    again = run_step(spark, settings, "bronze", WEB_EVENTS, "run-2", None)
    # The new records were all the forgotten user's: the range is recorded, nothing written
    # (so the run's later steps have nothing new; the backfill below runs them all).
    assert not again.skipped and again.rows == 0
    backfill = run_pipeline(settings, "backfill-1", dates=sorted(their_days))
    assert backfill["check_silver"].passed
    assert set(_holding(spark, settings, user).values()) == {0}
    assert published_view(keyspace) == truth_without.page_views
    replay = settings.model_copy(
        update={"lake": LakeSettings(root=str(tmp_path / "replay"), checkpoint_root=str(tmp_path))}
    )
    for step in THROUGH_PUBLISH[:3]:
        run_step(spark, replay, step, WEB_EVENTS, "replay-1", None)
    replayed = spark.read.format("delta").load(bronze_path(replay, WEB_EVENTS))
    assert replayed.where(F.instr(F.col("value").cast("string"), F.lit(user)) > 0).count() == 0
    assert replayed.count() > 0

    # The collector drops the user's new events (as userId or anonymousId) and says success.
    served = collector_settings(
        settings,
        f"{settings.kafka.events_topic}-c",
        write_keys={"test-site": "test-write-key-0001"},
    )
    suppressions = {"suppressions_topic": settings.kafka.suppressions_topic}
    served = served.model_copy(update={"kafka": served.kafka.model_copy(update=suppressions)})
    batch = [
        {"type": "page", "messageId": "m-1", "userId": user, "properties": {"path": "/x"}},
        {"type": "track", "messageId": "m-2", "anonymousId": user},  # invalid, and theirs
        {"type": "page", "messageId": "m-3", "userId": other, "properties": {"path": "/x"}},
    ]
    with serve_collector(served, "test-write-key-0001") as running:
        health = httpx.get(f"{running.url}/health", headers=operator(served), timeout=30)
        health = health.json()
        assert health["suppressions"]["loaded"] and health["suppressions"]["size"] == 1
        answer = httpx.post(f"{running.url}/v1/batch", json={"batch": batch}, auth=AUTH, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json() == {"success": True, "accepted": 3, "rejected": []}
        single = httpx.post(
            f"{running.url}/v1/page", json=batch[0] | {"messageId": "m-4"}, auth=AUTH
        )
        assert single.status_code == 200 and single.json()["success"]
        metrics = httpx.get(f"{running.url}/metrics", headers=operator(served), timeout=30)
        metrics = metrics.text
        written = consume_all(served, served.kafka.events_topic, 1, timeout_s=20)
        letters = consume_all(served, served.kafka.dlq_topic, 0, timeout_s=3)
    assert [json.loads(r.value())["event_id"] for r in written] == ["m-3"]
    assert letters == []
    assert 'collector_events_dropped_total{reason="suppressed"} 3.0' in metrics
    assert "collector_suppressions 1.0" in metrics
