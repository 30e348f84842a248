"""The speed layer's parse: the fields the views read against the whole contract, and a plain
``from_json`` of the whole schema (the raw engine), over the same records in one run.

Records are simulated web traffic (identified and anonymous visitors, campaigns, user
agents, traits) through the collector's own intake, with the headers it writes, kept in a
Parquet file so every pass reads the same bytes. Each pass parses every record and writes
the valid events' columns to Spark's ``noop`` sink (everything computed, nothing stored):

- **views**: :func:`views.input.check_records` with the fields the web views read
  (:func:`views.fields.fields_read`), the collector's records trusted by their header,
  as the speed layer runs it (``speed.parse = "views"``);
- **contract**: the same with every field of the contract (``speed.parse = "contract"``,
  the speed layer before);
- **plain**: ``from_json`` with the contract's whole schema and nothing else.

Passes alternate, ``--rounds`` of each; the median is reported, as wall time and per
event. Nothing is asserted. Runs in-process on ``local[2]``; no service is needed.

    .venv/bin/python -m bench.speed_parse --events 400000 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from core.settings import CollectorSettings, load_settings

TOLERANCE = timedelta(seconds=60)


def _records(events: int) -> list[tuple]:
    """The collector's records of ``events`` simulated calls: (partition, offset, value,
    headers)."""
    from ingest.enrich import RequestFacts
    from ingest.intake import Intake
    from ingest.simulator import SimulatorConfig, generate
    from pipelines import pipeline

    intake = Intake.of_pipeline(pipeline("web_events"), CollectorSettings())
    start = datetime.now(UTC) - timedelta(hours=1)
    rows: list[tuple] = []
    for event in generate(SimulatorConfig(seed=7, events=events, start=start, invalid_rate=0)):
        facts = RequestFacts(event.sent_at, "bench", "1.1.0")
        for record in intake.route([event.payload], facts).accepted:
            rows.append((len(rows) % 3, len(rows), record.value, record.headers))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from core.spark import build_spark_session
    from data_contracts import load_contract
    from data_contracts.derive import to_spark_schema
    from pipelines import pipeline
    from speed_layer.job import validated_by_collector
    from views.fields import fields_read
    from views.input import check_records, valid_of

    spark = build_spark_session(load_settings(), app_name="bench-speed-parse")
    web = pipeline("web_events")
    contract = load_contract(web.contract, web.contract_major)
    fields = fields_read(spark, web.view_specs, contract)
    clock = time.monotonic()
    rows = _records(args.events)
    print(f"[bench] {len(rows):,} records in {time.monotonic() - clock:.1f} s", file=sys.stderr)
    headers = "ARRAY<STRUCT<key: STRING, value: BINARY>>"
    schema = f"partition INT, offset LONG, value BINARY, headers {headers}"
    with tempfile.TemporaryDirectory(prefix="bench-speed-parse-") as folder:
        path = str(Path(folder) / "records")
        spark.createDataFrame(rows, schema).write.parquet(path)
        records = spark.read.parquet(path)
        whole = to_spark_schema(contract)
        passes = {
            "views": lambda: valid_of(
                check_records(
                    records,
                    contract,
                    TOLERANCE,
                    fields=fields,
                    validated=validated_by_collector(contract),
                )
            ),
            "contract": lambda: valid_of(check_records(records, contract, TOLERANCE)),
            "plain": lambda: records.select(
                F.from_json(F.col("value").cast("string"), whole).alias("e")
            ).select("e.*"),
        }
        seconds: dict[str, list[float]] = {name: [] for name in passes}
        for round_ in range(args.rounds + 1):  # the first round warms the JVM up, uncounted
            for name, frame in passes.items():
                clock = time.monotonic()
                frame().write.format("noop").mode("overwrite").save()
                if round_:
                    seconds[name].append(time.monotonic() - clock)
    spark.stop()
    result = {
        "records": len(rows),
        "rounds": args.rounds,
        "fields_parsed": fields.simpleString(),
        "passes": {
            name: {
                "median_s": round(statistics.median(times), 3),
                "us_per_event": round(statistics.median(times) / len(rows) * 1e6, 2),
                "events_per_s": round(len(rows) / statistics.median(times)),
            }
            for name, times in seconds.items()
        },
    }
    plain = result["passes"]["plain"]["median_s"]
    for name, figures in result["passes"].items():
        figures["ratio_to_plain"] = round(plain / figures["median_s"], 3)
        print(
            f"[bench] {name:9s} {figures['median_s']:7.2f} s  {figures['us_per_event']:6.2f} "
            f"us/event  {figures['events_per_s']:>9,}/s  {figures['ratio_to_plain']:.0%} of plain"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
