"""OpenLineage events of the batch steps: each step's Spark actions, with their datasets.

A bronze and a silver step run as the CLI runs them (``python -m batch_layer``,
its own Spark driver with OpenLineage's listener), on this test's topic and
lake, with the file transport; the events must name the Kafka topic bronze
read, the bronze table it wrote, and silver reading bronze into silver.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from core.settings import LineageSettings, Settings, child_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[3]


def test_bronze_and_silver_emit_their_lineage(lake_settings: Settings, tmp_path):
    from batch_layer.bronze import bronze_path
    from batch_layer.silver import silver_path
    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from tests.support.web import WEB_EVENTS

    events = tmp_path / "lineage" / "events.jsonl"
    settings = lake_settings.model_copy(
        update={"lineage": LineageSettings(location=events, namespace="test-lineage")}
    )
    produce_direct(generate(SimulatorConfig(seed=9, events=200)), settings)
    env = child_env(settings)
    for step in ("bronze", "silver"):
        done = subprocess.run(
            [sys.executable, "-m", "batch_layer", step, "--pipeline", "web_events"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]

    lines = [json.loads(line) for line in events.read_text().splitlines()]
    complete = [e for e in lines if e["eventType"] == "COMPLETE"]
    assert complete and {e["job"]["namespace"] for e in lines} == {"test-lineage"}

    def names(kind: str) -> set[str]:
        return {d["name"] for e in complete for d in e.get(kind, [])}

    bronze = bronze_path(settings, WEB_EVENTS).removeprefix("file:")
    silver = silver_path(settings, WEB_EVENTS).removeprefix("file:")
    assert settings.kafka.events_topic in names("inputs")
    assert bronze in names("outputs") and bronze in names("inputs")
    assert silver in names("outputs")
