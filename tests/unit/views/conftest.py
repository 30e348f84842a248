"""The two execution modes every view test runs under, and a simulated run with its truth.

Spark is the suite's one shared session (the ``spark`` fixture of ``tests/conftest.py``).

Every view test runs under both modes (Bytewax style), through ``views_over``:

- ``batch``: ``spark.read`` the event files, build the view, collect;
- ``stream``: ``spark.readStream`` the same files, one per micro-batch, with
  the speed layer's watermark, run the view in update mode with
  ``trigger(availableNow=True)`` and keep, per window and key, the row of the
  last micro-batch that updated it (what an upsert sink ends up holding).

Both give the same plain table: ``{(minute, *keys): {measure: value}}``, with
sketches read as numbers through ``views.merge.estimates``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from data_contracts import Contract, load_contract
from ingest.enrich import RequestFacts, enrich
from ingest.simulator import GroundTruth, SimEvent, SimulatorConfig, build_truth, generate
from views import VIEWS, ViewSpec, estimates
from views.input import parse_records

Table = dict[tuple[Any, ...], dict[str, Any]]

WATERMARK = "10 minutes"
"""The speed layer's watermark delay on ``event_time``."""

FUTURE_TOLERANCE = timedelta(seconds=60)
"""How far an event's time may lie after its ``receivedAt`` (the default settings')."""

SIMULATION = SimulatorConfig(
    seed=20240301,
    events=500,
    rate=2.0,  # ~4 minutes of traffic, so per-minute windows and updates across files matter
    duplicate_rate=0.05,
    late_rate=0.05,
    late_by_s=120.0,  # late, but within the watermark: both modes must see every event
    out_of_order_rate=0.3,
    skewed_client_rate=0.1,
    invalid_rate=0.05,
)


def _write_events(rows: Sequence[dict[str, Any]], directory: Path, files: int = 3) -> Path:
    """Write enriched events as JSON lines, split in order into ``files`` files."""
    directory.mkdir(parents=True, exist_ok=True)
    size = -(-len(rows) // files)
    for index in range(files):
        lines = "".join(json.dumps(row) + "\n" for row in rows[index * size : (index + 1) * size])
        (directory / f"events-{index:03d}.json").write_text(lines, encoding="utf-8")
    return directory


@dataclass(frozen=True)
class Streamed:
    """What a streaming run of a view left behind."""

    table: Table
    """Per window and key, the last row emitted."""
    batches_with_updates: int
    """Micro-batches that emitted at least one row."""
    state_rows: int
    """Rows held in the aggregation state after the last micro-batch."""


@pytest.fixture(scope="session")
def write_events() -> Callable[..., Path]:
    """``write_events(rows, directory, files=3)``: enriched events as JSON-lines files."""
    return _write_events


@dataclass
class Runner:
    """Runs views over event files in either mode; see the module docstring."""

    spark: SparkSession
    contract: Contract
    scratch: pytest.TempPathFactory

    def events(self, source: Path) -> DataFrame:
        """The views' input, batch: the event files checked by :mod:`views.input`."""
        return self._parsed(self.spark.read.text(str(source)))

    def _parsed(self, lines: DataFrame) -> DataFrame:
        """Lines of JSON as Kafka records, parsed as both layers parse them (no coordinates)."""
        records = lines.select("value", F.lit(0).alias("partition"), F.lit(0).alias("offset"))
        events, _ = parse_records(records, self.contract, FUTURE_TOLERANCE)
        return events

    def table(self, rows: DataFrame | Sequence[Row], spec: ViewSpec) -> Table:
        """``{(minute, *keys): {measure: value}}`` of view rows (a DataFrame or readable rows)."""
        collected = self._readable(rows, spec).collect() if isinstance(rows, DataFrame) else rows
        index = ("window_start", *spec.keys)
        table: Table = {}
        for row in collected:
            data = row.asDict()
            key = tuple(data.pop(name) for name in index)
            assert key not in table, f"{spec.name}: two rows for {key}"
            table[key] = data
        return table

    def batch(self, spec: ViewSpec, source: Path) -> Table:
        """Run the view over the files as the batch layer does."""
        return self.table(spec.build(self.events(source)), spec)

    def streams(self, specs: Sequence[ViewSpec], source: Path) -> dict[str, Streamed]:
        """Run views as the speed layer does, side by side (one query per view)."""
        lines = self.spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
        events = self._parsed(lines).withWatermark("event_time", WATERMARK)
        running = [(spec, *self._start(spec, events)) for spec in specs]
        return {spec.name: self._finish(spec, *started) for spec, *started in running}

    def _start(self, spec: ViewSpec, events: DataFrame) -> tuple[StreamingQuery, list]:
        updates: list[tuple[int, list[Row]]] = []

        def collect(batch: DataFrame, batch_id: int) -> None:
            updates.append((batch_id, self._readable(batch, spec).collect()))

        query = (
            spec.build(events)
            .writeStream.outputMode("update")
            .foreachBatch(collect)
            .option("checkpointLocation", str(self.scratch.mktemp(f"checkpoint-{spec.name}")))
            .trigger(availableNow=True)
            .start()
        )
        return query, updates

    def _finish(
        self, spec: ViewSpec, query: StreamingQuery, updates: list[tuple[int, list[Row]]]
    ) -> Streamed:
        query.awaitTermination(120)
        assert not query.isActive, f"{spec.name}: the streaming query did not finish"
        assert query.exception() is None, query.exception()
        latest: dict[tuple[Any, ...], Row] = {}
        for _, rows in sorted(updates, key=lambda update: update[0]):
            for row in rows:
                latest[tuple(row[name] for name in ("window_start", *spec.keys))] = row
        progress = query.lastProgress or {}
        return Streamed(
            table=self.table(list(latest.values()), spec),
            batches_with_updates=sum(1 for _, rows in updates if rows),
            state_rows=sum(op["numRowsTotal"] for op in progress.get("stateOperators", [])),
        )

    @staticmethod
    def _readable(rows: DataFrame, spec: ViewSpec) -> DataFrame:
        minute = F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start")
        shown = estimates(rows, spec, quantiles=(0.0, 0.5, 0.95, 1.0))
        return shown.select(minute, *(c for c in shown.columns if c != "window_start"))


@pytest.fixture(scope="session")
def runner(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Runner:
    """Runs views in batch or streaming mode.

    On its own SQL session of the shared SparkContext: two shuffle partitions
    (the tests' data is tiny; each partition of a stateful query is a state
    store) without changing the settings other tests see.
    """
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    session.conf.set("spark.sql.session.timeZone", "UTC")
    return Runner(session, load_contract(), tmp_path_factory)


@pytest.fixture(params=["batch", "stream"])
def mode(request: pytest.FixtureRequest) -> str:
    """The execution mode a view test runs under."""
    return request.param


@pytest.fixture(scope="session")
def views_over(runner: Runner) -> Callable[[str, Path], dict[str, Table]]:
    """``views_over(mode, source)``: every view's table over the event files, computed once.

    In ``stream`` mode the views run as side-by-side queries, and each must
    have emitted updates in at least two micro-batches, so the merging of
    state across micro-batches is exercised.
    """
    cache: dict[tuple[str, Path], dict[str, Table]] = {}

    def tables(mode: str, source: Path) -> dict[str, Table]:
        if (mode, source) not in cache and mode == "batch":
            cache[mode, source] = {spec.name: runner.batch(spec, source) for spec in VIEWS}
        elif (mode, source) not in cache:
            streamed = runner.streams(VIEWS, source)
            cache[mode, source] = {name: run.table for name, run in streamed.items()}
            once = [name for name, run in streamed.items() if run.batches_with_updates < 2]
            assert not once, f"{once}: updated in one micro-batch only; spread the events"
        return cache[mode, source]

    return tables


@dataclass(frozen=True)
class Simulation:
    """A simulated run as the views receive it, and what the simulator knows about it."""

    config: SimulatorConfig
    sent: list[SimEvent]
    """Every message sent: duplicates and invalid ones included."""
    events: list[SimEvent]
    """The valid events, deduplicated by messageId: the views' input."""
    source: Path
    """The enriched ``events`` as JSON lines, in the order they were sent."""
    truth: GroundTruth


@pytest.fixture(scope="session")
def simulation(tmp_path_factory: pytest.TempPathFactory) -> Simulation:
    """The simulated run, enriched by the collector's own code (skew-corrected timestamps)."""
    sent = generate(SIMULATION)
    seen: set[str] = set()
    events, rows = [], []
    for event in sent:
        if event.defect is not None or event.message_id in seen:
            continue
        seen.add(str(event.message_id))
        facts = RequestFacts(event.sent_at, source_id="simulator", contract_version="1.0.0")
        rows.append(enrich(event.payload, facts))
        events.append(event)
    truth = build_truth(sent)
    assert len(events) == truth.valid_events
    source = _write_events(rows, tmp_path_factory.mktemp("simulation"))
    return Simulation(SIMULATION, sent, events, source, truth)


@pytest.fixture(scope="session")
def simulated(
    views_over: Callable[[str, Path], dict[str, Table]], simulation: Simulation
) -> Callable[[str, ViewSpec], Table]:
    """``simulated(mode, spec)``: the view's table over the simulated run."""
    return lambda mode, spec: views_over(mode, simulation.source)[spec.name]
