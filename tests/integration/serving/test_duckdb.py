"""An analyst reads the lake with DuckDB, as ``docs/sql.md`` shows, and gets Spark's answers.

The published lake (:mod:`tests.support.lake`: two days of simulated traffic through Kafka
and the real batch pipeline) is read by an analyst's script (``duckdb_client.py``) in the
analyst's virtualenv: DuckDB and its Delta extension from PyPI, the extension loaded from
the installed wheel. The script runs the docs' own setup and DuckDB queries; every answer,
and every row of every gold table (sketches compared byte for byte), must equal what Spark
reads from the same Delta tables, and the queries must equal the ground truth of the sent
events. What a direct reader sees is the contract's concern: silver's personal columns are
there, gold has none.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections import Counter
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from ingest.simulator import build_truth
from serving.connect.examples import duckdb_queries, duckdb_setup
from tests.support.lake import GROUP

# One worker builds the session's published lake once for every module reading it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

SCRIPT = Path(__file__).with_name("duckdb_client.py")
PARAMS = {"start": "2024-03-04T12:00:00Z", "end": "2024-03-05T12:00:00Z"}
"""Half of each day of the lake: the queries' range must cut rows out."""
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
GOLD = ("page_activity", "site_activity", "search_terms", "clicks")


def _docs_setup(lake: str, silver: str) -> str:
    """The docs' DuckDB setup, its local lake and silver table pointed at the published lake."""
    setup = duckdb_setup()
    for placeholder, value in (
        ('".platform/lake"', lake),
        ('f"{lake}/silver/web_events_v1"', silver),
    ):
        assert placeholder in setup, f"docs/sql.md's DuckDB setup no longer sets {placeholder}"
        setup = setup.replace(placeholder, json.dumps(value))
    return setup


@pytest.fixture(scope="module")
def reader(published_lake, client_python: Path, tmp_path_factory) -> dict:
    """What the analyst's DuckDB script saw, and the home folder it ran with."""
    from layout.lake import silver_path

    settings = published_lake.settings
    folder = tmp_path_factory.mktemp("duckdb")
    home = folder / "home"
    home.mkdir()
    silver = silver_path(settings, settings.kafka.events_topic)
    job = {
        "setup": _docs_setup(settings.lake.root, silver),
        "queries": duckdb_queries(),
        "params": PARAMS,
    }
    (folder / "job.json").write_text(json.dumps(job))
    done = subprocess.run(
        [client_python, SCRIPT, folder / "job.json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": os.environ["PATH"], "HOME": str(home)},
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "home": home}


# --- Spark over the same Delta tables ----------------------------------------------------------


def _plain(value):
    """As the script reports a value: dates in ISO 8601, binary values by their SHA-256."""
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return hashlib.sha256(value).hexdigest()
    return value


def _spark_rows(frame) -> list[dict]:
    """Every row of ``frame``, timestamps as microseconds since the epoch (``unix_micros``)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import TimestampType

    columns = [
        F.unix_micros(F.col(f.name)).alias(f.name)
        if isinstance(f.dataType, TimestampType)
        else F.col(f.name)
        for f in frame.schema
    ]
    return [
        {k: _plain(v) for k, v in row.asDict().items()} for row in frame.select(columns).collect()
    ]


def _in_range(frame, column: str):
    from pyspark.sql import functions as F

    start, end = (F.to_timestamp(F.lit(PARAMS[k])) for k in ("start", "end"))
    return frame.where((F.col(column) >= start) & (F.col(column) < end))


def _gold(spark, settings, name: str):
    from layout.lake import gold_path
    from views import view

    return spark.read.format("delta").load(gold_path(settings, view(name)))


def _ordered(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def test_duckdb_loads_the_delta_extension_from_the_installed_wheel(reader, client_python):
    (path,) = (row[0] for row in reader["extension"])
    site_packages = client_python.parents[1] / "lib"
    assert Path(path).is_relative_to(site_packages), path
    assert "/duckdb_ext/extensions/" in path and path.endswith("delta.duckdb_extension")
    assert reader["autoinstall"] is False
    assert not any(reader["home"].iterdir()), "DuckDB wrote to the home folder (a download?)"


def test_every_gold_row_reads_the_same_in_duckdb_and_spark(reader, published_lake, spark):
    for name in GOLD:
        expected = _spark_rows(_gold(spark, published_lake.settings, name))
        seen = reader["tables"][f"gold_{name}"]
        assert expected, f"gold {name} is empty: a weak test"
        assert len(seen) == len(expected), name
        assert _ordered(seen) == _ordered(expected), name


def test_the_docs_gold_queries_equal_spark_and_the_ground_truth(reader, published_lake, spark):
    from pyspark.sql import functions as F

    settings = published_lake.settings
    rows = reader["rows"]
    pages = (
        _in_range(_gold(spark, settings, "page_activity"), "window_start")
        .groupBy("path")
        .agg(F.sum("page_views").alias("views"), F.sum("load_count").alias("timed_loads"))
        .orderBy(F.desc("views"), "path")
        .limit(10)
    )
    assert rows["gold_top_pages"] == [list(row) for row in pages.collect()]
    truth = Counter()
    for minute, by_path in build_truth(published_lake.events).page_views.items():
        if PARAMS["start"] <= minute < PARAMS["end"]:
            truth.update(by_path)
    ranked = sorted(truth.items(), key=lambda item: (-item[1], item[0]))[:10]
    assert [row[:2] for row in rows["gold_top_pages"]] == [list(item) for item in ranked]
    assert len(truth) > 1 and sum(truth.values()) < sum(
        sum(m.values()) for m in build_truth(published_lake.events).page_views.values()
    ), "the range cut nothing out: a weak test"

    hours = (
        _in_range(_gold(spark, settings, "site_activity"), "window_start")
        .groupBy(F.unix_micros(F.date_trunc("hour", "window_start")).alias("hour"))
        .agg(F.sum("events"), F.sum("page_views"))
        .orderBy("hour")
    )
    assert rows["gold_events_per_hour"] == [list(row) for row in hours.collect()]
    per_hour = Counter()
    for minute, count in build_truth(published_lake.events).events_per_minute.items():
        if PARAMS["start"] <= minute < PARAMS["end"]:
            hour = datetime.fromisoformat(minute[:13] + ":00:00+00:00")
            per_hour[(hour - EPOCH) // timedelta(microseconds=1)] += count
    assert [row[:2] for row in rows["gold_events_per_hour"]] == sorted(map(list, per_hour.items()))


def test_the_docs_silver_query_equals_spark(reader, published_lake, spark):
    from pyspark.sql import functions as F

    from layout.lake import silver_path

    settings = published_lake.settings
    silver = spark.read.format("delta").load(silver_path(settings, settings.kafka.events_topic))
    days = (
        _in_range(silver, "event_time")
        .groupBy("event_date", "type")
        .agg(F.count(F.lit(1)), F.countDistinct("anonymousId"))
        .orderBy("event_date", "type")
    )
    expected = [[_plain(v) for v in row] for row in days.collect()]
    assert reader["rows"]["silver_events_by_day"] == expected
    assert {row[0] for row in expected} == {"2024-03-04", "2024-03-05"}


def test_a_direct_reader_sees_silver_personal_columns_and_none_in_gold(reader):
    from data_contracts import load_contract
    from data_contracts.derive.privacy import hidden_in_sql

    restricted = {path.split(".")[0] for path in hidden_in_sql(load_contract("web_events", 1))}
    assert {"userId", "traits", "context"} <= restricted
    columns = reader["columns"]
    assert restricted <= set(columns["silver_web_events"])  # the docs' warning holds
    for name in GOLD:
        assert not restricted & set(columns[f"gold_{name}"]), name
