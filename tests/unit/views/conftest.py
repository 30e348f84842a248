"""The two execution modes every view test runs under, and a simulated run with its truth.

Spark is the suite's one shared session (the ``spark`` fixture of ``tests/conftest.py``).

Every view test runs under both modes (Bytewax style), through ``views_over``:

The views' input is parsed by :mod:`views.input` and each person's id
replaced by its keyed digest (:func:`views.digest.pseudonymise`, under
:data:`KEY`), as both layers prepare it.

- ``batch``: ``spark.read`` the event files, build the view, collect;
- ``stream``: ``spark.readStream`` the same files, one per micro-batch, with
  the speed layer's watermark, in one query with ``trigger(availableNow=True)``
  whose ``foreachBatch`` builds every view over the batch and folds its
  partial rows into the rows held so far with the speed layer's own rule
  (:func:`speed_layer.sink.fold`, fenced per batch): what Cassandra ends up
  holding.

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
from pydantic import SecretStr
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from core.cassandra import view_row_values
from core.frames import local_frame
from data_contracts import Contract, load_contract
from ingest.enrich import RequestFacts, enrich
from ingest.simulator import GroundTruth, SimEvent, SimulatorConfig, build_truth, generate
from pipelines import pipeline
from speed_layer.sink import fold
from tests.support.web import WEB_VIEWS
from views import ViewSpec, estimates
from views.digest import pseudonymise
from views.input import parse_records
from views.kinds import kind

Table = dict[tuple[Any, ...], dict[str, Any]]

WATERMARK = "10 minutes"
"""The speed layer's watermark delay on ``event_time``."""

FUTURE_TOLERANCE = timedelta(seconds=60)
"""How far an event's time may lie after its ``receivedAt`` (the default settings')."""

KEY = SecretStr("views-tests-identity-key-0123456789abcdef")
"""The ``views.identity_key`` the view tests digest personal ids under."""

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
    """Per window and key, the row the folds left."""
    batches_with_updates: int
    """Micro-batches that gave the view at least one partial row."""
    frame: DataFrame
    """The rows the folds left, as the view's columns (sketches as bytes)."""


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
    identity: tuple[str, ...]
    """The pipeline's personal fields, digested in the views' input."""

    def events(self, source: Path, *, digested: bool = True) -> DataFrame:
        """The views' input, batch: the event files checked by :mod:`views.input`, ids
        digested (``digested=False``: as they were sent, as before the digest existed)."""
        return self._parsed(self.spark.read.text(str(source)), digested)

    def _parsed(self, lines: DataFrame, digested: bool = True) -> DataFrame:
        """Lines of JSON as Kafka records, parsed as both layers parse them (no coordinates),
        each person's id a keyed digest."""
        records = lines.select("value", F.lit(0).alias("partition"), F.lit(0).alias("offset"))
        events, _ = parse_records(records, self.contract, FUTURE_TOLERANCE)
        return pseudonymise(events, self.identity, KEY) if digested else events

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
        """Run views as the speed layer does: one query, each batch's partials folded."""
        lines = self.spark.readStream.option("maxFilesPerTrigger", 1).text(str(source))
        events = self._parsed(lines).withWatermark("event_time", WATERMARK)
        held: dict[str, dict[tuple[Any, ...], tuple[list[Any], tuple[int, int]]]] = {
            spec.name: {} for spec in specs
        }
        updated = dict.fromkeys(held, 0)

        def fold_batch(batch: DataFrame, batch_id: int) -> None:
            for spec in specs:
                measures = [m.name for m in spec.measures]
                kinds = [m.kind for m in spec.measures]
                rows = spec.build(batch).collect()
                updated[spec.name] += bool(rows)
                for row in rows:
                    start, keys, values = view_row_values(row.asDict(), spec.keys, measures)
                    old, fence = held[spec.name].get((start, *keys), (None, None))
                    merged = fold(kinds, values, old, fence, (0, batch_id))
                    if merged is not None:
                        held[spec.name][(start, *keys)] = (merged, (0, batch_id))

        query = (
            events.writeStream.foreachBatch(fold_batch)
            .option("checkpointLocation", str(self.scratch.mktemp("checkpoint-views")))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert not query.isActive, "the streaming query did not finish"
        assert query.exception() is None, query.exception()
        return {
            spec.name: Streamed(
                table=self.table(frame, spec),
                batches_with_updates=updated[spec.name],
                frame=frame,
            )
            for spec in specs
            for frame in [self._frame(spec, held[spec.name])]
        }

    def _frame(
        self, spec: ViewSpec, held: dict[tuple[Any, ...], tuple[list[Any], tuple[int, int]]]
    ) -> DataFrame:
        """The folded rows as a DataFrame of the view's columns and Spark types."""
        types = ["timestamp", *("string" for _ in spec.keys)]
        types += [kind(m.kind).spark_type for m in spec.measures]
        schema = ", ".join(f"{c} {t}" for c, t in zip(spec.columns, types, strict=True))
        rows = [(*key, *values) for key, (values, _) in held.items()]
        return local_frame(self.spark, rows, schema)

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
    web = pipeline("web_events")
    return Runner(session, load_contract("web_events", 1), tmp_path_factory, web.identity)


@pytest.fixture(params=["batch", "stream"])
def mode(request: pytest.FixtureRequest) -> str:
    """The execution mode a view test runs under."""
    return request.param


@pytest.fixture(scope="session")
def views_over(runner: Runner) -> Callable[[str, Path], dict[str, Table]]:
    """``views_over(mode, source)``: every view's table over the event files, computed once.

    In ``stream`` mode every view must have had partial rows in at least two
    micro-batches, so the folding across micro-batches is exercised.
    """
    cache: dict[tuple[str, Path], dict[str, Table]] = {}

    def tables(mode: str, source: Path) -> dict[str, Table]:
        if (mode, source) not in cache and mode == "batch":
            cache[mode, source] = {spec.name: runner.batch(spec, source) for spec in WEB_VIEWS}
        elif (mode, source) not in cache:
            streamed = runner.streams(WEB_VIEWS, source)
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
