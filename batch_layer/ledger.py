"""The pipeline ledger: what each step has done, so the next step knows its work.

One small Delta table per pipeline (``_pipelines/<name>/ledger``), one row
appended per step run: an ``entry_id``, the step, the run id, the days it
covered, the ``as_of`` time its data reaches (the moment bronze fixed its
stable end), the ids of the upstream rows it ``consumed`` and a JSON
detail. Each step's pending work is the rows of the step before it that no
row of its own consumed:

- silver covers the event days of bronze records it has not seen yet;
- gold covers the days of the silver rows no gold row consumed;
- the gate validates the rows gold has not consumed (silver) or publish has
  not (gold), and names them in its own ``consumed``;
- publish loads the gold rows no publish consumed, once the latest gold gate
  passed on them;
- reconcile compares the days of the publish rows no passed reconcile
  consumed (a failed one consumes nothing, so its windows are compared again);
- a derived pipeline's ``derived`` rows (in its own ledger) consume its
  inputs' runs: the silver runs their gate passed, or a derived input's
  passed rows (:mod:`batch_layer.derive`).

Work is matched by id, never by clock: a silver row appended while gold runs
is not among what that gold run consumed, so the next gold run takes it.
(Rows written before ``consumed`` was recorded have ``consumed`` None and
consumed what was recorded before them, as the ledger used to decide.) A
pipeline's steps also run one at a time (one Airflow pool slot per
pipeline, ``dags/pipeline_factory.py``).

A step that fails before appending its row leaves its work pending, and
every step rewrites whole days, so rerunning any step is safe. The ledger
is the only coupling between steps: any of them can run alone, from a DAG
task, a backfill or a shell.

A process keeps the entries it read with the table version they came from
and reads the table again only when the log has a newer commit (a listing of
``_delta_log``, no Spark job): a step reads the ledger several times, and an
unchanged ledger costs a file listing, not a table scan.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from core.frames import local_frame
from core.settings import Settings
from layout.lake import table_version

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from pipelines import PipelineSpec

__all__ = ["Entry", "Ledger", "covers", "ledger_path", "pending", "pending_days"]

STEPS = ("silver", "gold", "gate", "publish", "reconcile", "derived")


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Entry:
    """One step run."""

    step: str
    run_id: str
    recorded_at: datetime
    days: tuple[date, ...] = ()
    as_of: datetime | None = None
    passed: bool = True
    detail: dict[str, Any] = field(default_factory=dict)
    consumed: tuple[str, ...] | None = None
    """Ids of the upstream entries this run took as its work; None on rows older than ids."""
    entry_id: str = field(default_factory=_new_id)


def covers(later: Entry, earlier: Entry) -> bool:
    """Whether ``later`` took ``earlier`` as its work (by id; by time for a row without ids)."""
    if later.consumed is None:
        return later.recorded_at > earlier.recorded_at
    return earlier.entry_id in later.consumed


def pending(entries: list[Entry], upstream: str, downstream: str) -> list[Entry]:
    """The passed ``upstream`` entries no ``downstream`` entry consumed, oldest first."""
    takers = [e for e in entries if e.step == downstream]
    taken = {i for t in takers if t.consumed is not None for i in t.consumed}
    legacy = max((t.recorded_at for t in takers if t.consumed is None), default=None)
    return sorted(
        (
            e
            for e in entries
            if e.step == upstream
            and e.passed
            and e.entry_id not in taken
            and (legacy is None or e.recorded_at >= legacy)
        ),
        key=lambda e: e.recorded_at,
    )


def pending_days(entries: list[Entry], upstream: str, downstream: str) -> tuple[date, ...]:
    """Days of the ``upstream`` entries no ``downstream`` entry consumed.

    >>> t = lambda m: datetime(2024, 1, 1, 0, m, tzinfo=UTC)
    >>> d = lambda n: date(2024, 1, n)
    >>> s1, s2 = Entry("silver", "a", t(1), (d(1),)), Entry("silver", "b", t(2), (d(2), d(3)))
    >>> gold = Entry("gold", "a", t(3), (d(1),), consumed=(s1.entry_id,))  # s2 came mid-run
    >>> pending_days([s1, s2, gold], "silver", "gold")
    (datetime.date(2024, 1, 2), datetime.date(2024, 1, 3))
    """
    return tuple(sorted({day for e in pending(entries, upstream, downstream) for day in e.days}))


def ledger_path(settings: Settings, spec: PipelineSpec) -> str:
    """Where the pipeline's ledger lives: ``<lake root>/_pipelines/<name>/ledger``."""
    return f"{settings.lake.root.rstrip('/')}/_pipelines/{spec.name}/ledger"


class Ledger:
    """Read and append the ledger of one pipeline."""

    def __init__(self, spark: SparkSession, settings: Settings, spec: PipelineSpec) -> None:
        self.spark = spark
        self.path = ledger_path(settings, spec)

    def entries(self) -> list[Entry]:
        version = table_version(self.spark, self.path)
        if version is None:
            return []
        cached = _READ.get(self.path)
        if cached is not None and cached[0] == version:
            return list(cached[1])
        # The version first, then the rows: a commit in between makes the next call read again.
        rows = self.spark.read.format("delta").load(self.path).collect()  # a few hundred rows
        entries = sorted((_entry(r.asDict()) for r in rows), key=lambda e: e.recorded_at)
        _READ[self.path] = (version, tuple(entries))
        return entries

    def last(self, step: str) -> Entry | None:
        entries = [e for e in self.entries() if e.step == step]
        return entries[-1] if entries else None

    def append(self, entry: Entry) -> None:
        from pyspark.sql.types import (
            ArrayType,
            BooleanType,
            DateType,
            StringType,
            StructField,
            StructType,
            TimestampType,
        )

        if entry.step not in STEPS:
            raise ValueError(f"Unknown step {entry.step!r}; steps are {STEPS}.")
        schema = StructType(
            [
                StructField("entry_id", StringType(), False),
                StructField("step", StringType(), False),
                StructField("run_id", StringType(), False),
                StructField("recorded_at", TimestampType(), False),
                StructField("days", ArrayType(DateType()), False),
                StructField("as_of", TimestampType(), True),
                StructField("passed", BooleanType(), False),
                StructField("detail", StringType(), False),
                StructField("consumed", ArrayType(StringType()), True),
            ]
        )
        row = (
            entry.entry_id,
            entry.step,
            entry.run_id,
            entry.recorded_at,
            list(entry.days),
            entry.as_of,
            entry.passed,
            json.dumps(entry.detail, default=str, sort_keys=True),
            list(entry.consumed) if entry.consumed is not None else None,
        )
        before = _READ.pop(self.path, None)
        # mergeSchema: ledgers written before entry_id and consumed gain the columns.
        (
            local_frame(self.spark, [row], schema)
            .write.format("delta")
            .mode("append")
            .option("mergeSchema", "true")
            .save(self.path)
        )
        # Only this commit since the entries read: they stay known, with this one added.
        after = table_version(self.spark, self.path)
        known = None
        if after is not None and after[0] == 0:
            known = ()  # this append created the ledger
        elif after is not None and before is not None and after[0] == before[0][0] + 1:
            known = before[1]
        if known is not None:
            written = _entry(dict(zip(schema.fieldNames(), row, strict=True)))  # as read back
            entries = sorted((*known, written), key=lambda e: e.recorded_at)
            _READ[self.path] = (after, tuple(entries))


_READ: dict[str, tuple[tuple[int, int], tuple[Entry, ...]]] = {}
"""Ledger path -> (table version and commit time, its entries) as this process last read
or wrote them."""


def _entry(row: dict[str, Any]) -> Entry:
    """An entry from a ledger row (``entry_id`` made up, stably, for rows older than ids)."""
    recorded_at = row["recorded_at"].astimezone(UTC)  # PySpark: naive local time
    consumed = row.get("consumed")
    return Entry(
        step=row["step"],
        run_id=row["run_id"],
        recorded_at=recorded_at,
        days=tuple(row["days"] or ()),
        as_of=row["as_of"].astimezone(UTC) if row["as_of"] else None,
        passed=row["passed"],
        detail=json.loads(row["detail"] or "{}"),
        consumed=tuple(consumed) if consumed is not None else None,
        entry_id=row.get("entry_id") or f"{row['step']}:{row['run_id']}:{recorded_at.isoformat()}",
    )
