"""Silver's rows made without Kafka: web events through the collector's intake, then the
parse; the checkout service's records through the parse."""

from __future__ import annotations

from datetime import timedelta

from core.frames import local_frame
from core.settings import CollectorSettings
from ingest.enrich import RequestFacts
from ingest.intake import Intake
from pipelines import pipeline
from views.input import parse_records

__all__ = ["checkout_silver_rows", "web_silver_rows"]


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


def checkout_silver_rows(spark, records, first_offset: int = 0):
    """Silver's rows of the checkout service's ``records``
    (:class:`pipelines.simulators.checkouts.Record`), each event once."""
    rows = [(0, n, r.value) for n, r in enumerate(records, start=first_offset)]
    frame = local_frame(spark, rows, "partition INT, offset LONG, value BINARY")
    checkouts = pipeline("checkouts")
    valid, _ = parse_records(frame, checkouts.load_contract(), timedelta(minutes=1))
    return valid.dropDuplicates(["source_id", "event_id"])
