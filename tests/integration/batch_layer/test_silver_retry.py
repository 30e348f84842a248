"""Silver retried after a failure between its append and its ledger entry, on the real stack.

The ledger cannot be written (a file stands where its Delta table would be),
so the first silver attempt appends its rows and rejects, then fails. Bronze
ingests more before the retry, so the retry's range holds the failed
attempt's records and new ones, and its bronze run (Delta's ``txnVersion``)
is new: the retry must still append every event and reject once, and its
gate must pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import Producer

from batch_layer.bronze import ingest_bronze
from batch_layer.ledger import ledger_path
from batch_layer.quality import check_silver
from batch_layer.silver import build_silver, rejects_path, silver_path
from batch_layer.staging import staging_root
from core.settings import Settings
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def _produce_rejects(settings: Settings, texts: list[str]) -> None:
    """Records silver rejects (no event id, no timestamp)."""
    producer = Producer(settings.kafka.client_config())
    for text in texts:
        value = json.dumps({"type": "page", "userId": "u-bad", "properties": {"path": text}})
        producer.produce(settings.kafka.events_topic, value=value.encode())
    assert producer.flush(30) == 0


def _runs_staged(settings: Settings) -> list[str]:
    root = Path(staging_root(settings, WEB_EVENTS))
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def test_a_retry_after_bronze_ran_again_appends_each_event_once(spark, lake_settings):
    settings = lake_settings
    first = generate(SimulatorConfig(seed=41, events=60, duplicate_rate=0.1))
    second = generate(SimulatorConfig(seed=42, events=40, duplicate_rate=0.1))
    again = first[:3]  # copies of events the failed attempt appended, sent after it
    truth = build_truth([*first, *second, *again])
    produce_direct(first, settings)
    _produce_rejects(settings, ["/a", "/b"])
    ingest_bronze(spark, settings, WEB_EVENTS)

    blocker = Path(ledger_path(settings, WEB_EVENTS))
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not a Delta table: the ledger cannot be written")
    with pytest.raises(Exception):  # noqa: B017 - whatever Delta raises for a path that is a file
        build_silver(spark, settings, spec=WEB_EVENTS, run_id="attempt-1")
    appended = spark.read.format("delta").load(silver_path(settings, WEB_EVENTS)).count()
    assert appended == build_truth(first).valid_events  # the append happened, the entry did not
    assert spark.read.format("delta").load(rejects_path(settings, WEB_EVENTS)).count() == 2
    (failed,) = _runs_staged(settings)
    blocker.unlink()

    produce_direct([*second, *again], settings)
    _produce_rejects(settings, ["/c"])
    assert ingest_bronze(spark, settings, WEB_EVENTS).run == 2
    retry = build_silver(spark, settings, spec=WEB_EVENTS, run_id="attempt-2")

    silver = spark.read.format("delta").load(retry.path)
    assert silver.count() == truth.valid_events
    assert silver.groupBy("source_id", "event_id").count().where("count > 1").count() == 0
    rejects = spark.read.format("delta").load(rejects_path(settings, WEB_EVENTS))
    assert rejects.count() == 3
    assert rejects.select("partition", "offset").distinct().count() == 3
    # The failed attempt's staging folder is gone; the retry's waits for its gate.
    assert failed not in _runs_staged(settings) and len(_runs_staged(settings)) == 1

    report = check_silver(spark, settings, WEB_EVENTS, run_id="attempt-2")
    assert report.passed, report.failures()
    checks = {r["name"].split(": ", 1)[1]: r for r in report.reconciliations if ": " in r["name"]}
    counted = checks["its events = silver rows holding them + copies dropped"]
    delivered = sum(1 for e in [*first, *second, *again] if e.defect is None)
    assert counted["expected"] == counted["actual"] == delivered
    assert _runs_staged(settings) == []
