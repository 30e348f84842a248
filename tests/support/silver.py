"""Silver's rows of web events made without Kafka: the collector's intake, then the parse."""

from __future__ import annotations

from datetime import timedelta

from core.frames import local_frame
from core.settings import CollectorSettings
from ingest.enrich import RequestFacts
from ingest.intake import Intake
from pipelines import pipeline
from views.input import parse_records

__all__ = ["web_silver_rows"]


def web_silver_rows(spark, calls, first_offset: int = 0):
    """Silver's rows of ``calls`` (payload, received at), each event once, as the collector
    and silver make them (Kafka coordinates: partition 0, offsets from ``first_offset``)."""
    intake = Intake.of_collector(CollectorSettings())
    rows = []
    for offset, (payload, received) in enumerate(calls, start=first_offset):
        facts = RequestFacts(received, "simulator", intake.contract.version)
        rows += [(0, offset, r.value) for r in intake.route([payload], facts).accepted]
    records = local_frame(spark, rows, "partition INT, offset LONG, value BINARY")
    web = pipeline("web_events")
    valid, _ = parse_records(records, web.load_contract(), timedelta(minutes=1))
    return valid.dropDuplicates(["source_id", "event_id"])
