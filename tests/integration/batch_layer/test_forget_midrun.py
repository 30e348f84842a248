"""A forget between ``silver`` and ``check_silver``, on Kafka, Spark, Delta and Cassandra.

Airflow may run the forget DAG's first task while an ingest run waits for
its silver gate (both are in the pipeline's one-slot pool). The gate of that
silver run must still balance: gold and publish run, the boundary moves,
and the forgotten user is in no table and no staging folder.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import functions as F

from batch_layer.bronze import bronze_path
from batch_layer.gold import gold_path
from batch_layer.runner import run_step, run_steps
from batch_layer.silver import rejects_path, silver_path
from batch_layer.staging import staging_root
from core.settings import Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]

GATED = ("check_silver", "gold", "check_gold", "publish")


def _theirs(user: str):
    def match(payload) -> bool:
        return isinstance(payload, dict) and user in (
            payload.get("userId"),
            payload.get("anonymousId"),
        )

    return match


def _rows_naming(spark, path: str, user: str) -> int:
    """Rows of the Delta table at ``path`` whose text (every column) holds ``user``."""
    frame = spark.read.format("delta").load(path)
    text = F.concat_ws(
        "\u0001", *(F.coalesce(F.col(f"`{c}`").cast("string"), F.lit("")) for c in frame.columns)
    )
    return frame.where(F.instr(text, F.lit(user)) > 0).count()


def _staged_files_naming(spark, settings: Settings, user: str) -> int:
    """Rows of every Parquet file under the staging folders (current or not) holding ``user``,
    plus the transaction-log files naming it."""
    root = Path(staging_root(settings, WEB_EVENTS))
    files = [str(f) for f in root.rglob("*.parquet") if "_delta_log" not in f.parts]
    logs = [f for f in root.rglob("*") if "_delta_log" in f.parts and f.is_file()]
    found = sum(user.encode() in f.read_bytes() for f in logs)
    for file in files:
        raw = spark.read.parquet(file)
        text = F.concat_ws("\u0001", *(F.col(f"`{c}`").cast("string") for c in raw.columns))
        found += raw.where(F.instr(text, F.lit(user)) > 0).count()
    return found


def test_a_forget_before_the_silver_gate_lets_the_run_reach_publish(
    spark, pipeline_settings, gold_page_views, published_view
):
    settings = pipeline_settings
    events = generate(
        SimulatorConfig(
            seed=52,
            events=400,
            rate=0.02,  # about five and a half hours of traffic
            start=datetime(2024, 3, 1, 9, tzinfo=UTC),
            users=40,
            known_user_rate=0.5,
            duplicate_rate=0.1,
        )
    )
    # A known user whose traffic holds copies: silver dropped some of their records.
    counts = Counter(e.payload.get("userId") for e in events if e.defect is None)
    copied = {e.payload.get("userId") for e in events if e.duplicate and e.defect is None}
    user = max((u for u in counts if u and u in copied), key=lambda u: counts[u])
    theirs = _theirs(user)
    truth_without = build_truth(e for e in events if not theirs(e.payload))
    produce_direct(events, settings)
    producer = Producer(settings.kafka.client_config())
    for who in (user, "someone-else"):  # a record silver rejects, naming its user
        bad = {"type": "page", "userId": who, "properties": {"path": "/r"}}
        producer.produce(settings.kafka.events_topic, value=json.dumps(bad).encode())
    assert producer.flush(30) == 0

    run_step(spark, settings, "bronze", WEB_EVENTS, "ingest-1", None)
    silver = run_step(spark, settings, "silver", WEB_EVENTS, "ingest-1", None)
    assert silver.duplicates > 0 and silver.rejects == 2
    staged = Path(staging_root(settings, WEB_EVENTS))
    assert _staged_files_naming(spark, settings, user) > 0

    summary, code = run_steps(spark, settings, ("forget",), WEB_EVENTS, "forget-1", user=user)
    assert code == 0, summary
    erased = summary["steps"]["forget"]["result"]["tables"]["staging"]
    theirs_delivered = sum(1 for e in events if theirs(e.payload) and e.defect is None)
    assert erased["rows_deleted"] == theirs_delivered + 1  # their events, copies and reject
    assert _staged_files_naming(spark, settings, user) == 0  # no file, old or current

    # The ingest run's gate, then gold and publish: the run moves on.
    summary, code = run_steps(spark, settings, GATED, WEB_EVENTS, "ingest-1")
    assert code == 0, summary.get("failed")
    boundaries = summary["steps"]["publish"]["result"]["boundaries"]
    assert boundaries and all(b > datetime(2024, 3, 2, tzinfo=UTC) for b in boundaries.values())
    assert gold_page_views(settings) == truth_without.page_views
    assert published_view(settings.cassandra.keyspace) == truth_without.page_views

    tables = [
        bronze_path(settings, WEB_EVENTS),
        silver_path(settings, WEB_EVENTS),
        rejects_path(settings, WEB_EVENTS),
        *(gold_path(settings, view) for view in WEB_EVENTS.view_specs),
    ]
    assert {path: _rows_naming(spark, path, user) for path in tables} == dict.fromkeys(tables, 0)
    assert _rows_naming(spark, rejects_path(settings, WEB_EVENTS), "someone-else") == 1
    assert not staged.exists() or not any(staged.iterdir())  # the passed gate deleted it
