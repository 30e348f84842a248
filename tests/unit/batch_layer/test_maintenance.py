"""Which tables maintenance compacts and vacuums, the pipeline ledger included."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

from batch_layer.ledger import Entry, Ledger
from batch_layer.maintenance import lake_tables, optimize, vacuum
from core.settings import BatchSettings, LakeSettings, Settings
from tests.support.web import WEB_EVENTS, WEB_VIEWS


def test_every_delta_table_of_the_pipeline_and_nothing_else(lake_settings: Settings):
    root = "s3a://acme-lake/prod"
    assert lake_tables(lake_settings, WEB_EVENTS) == [
        f"{root}/bronze/web_events_v1",
        f"{root}/silver/web_events_v1",
        f"{root}/silver/web_events_v1_rejects",
        *(f"{root}/gold/{spec.name}" for spec in WEB_VIEWS),
        f"{root}/_pipelines/web_events/ledger",
    ]


def test_the_ledger_is_compacted_and_vacuumed_and_keeps_its_rows(spark, tmp_path: Path):
    settings = Settings(
        lake=LakeSettings(root=str(tmp_path / "lake")),
        batch=BatchSettings(reports_dir=tmp_path / "quality", vacuum_retention_hours=0),
    )
    ledger = Ledger(spark, settings, WEB_EVENTS)
    for n in range(1, 5):  # one small file per step run
        at = datetime(2024, 3, n, tzinfo=UTC)
        ledger.append(Entry("silver", f"run-{n}", at, (date(2024, 3, n),), at))
    before = ledger.entries()

    compacted = optimize(spark, settings, WEB_EVENTS)
    vacuumed = vacuum(spark, settings, WEB_EVENTS)

    assert compacted[ledger.path] == {"removed": 4, "added": 1}
    assert vacuumed == [ledger.path]  # the only table this pipeline has so far
    assert len(list(Path(ledger.path).glob("*.parquet"))) == 1
    assert ledger.entries() == before
