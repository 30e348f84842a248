"""The pipeline ledger: what each step has done, so the next step knows its work.

One small Delta table per pipeline (``_pipelines/<name>/ledger``), one row
appended per step run: the step, the run id, the days it covered, the
``as_of`` time its data reaches (the moment bronze fixed its stable end)
and a JSON detail. Each step derives its pending work from the rows of the
step before it, recorded after its own last row:

- silver covers the event days of bronze records it has not seen yet;
- gold covers the days silver rebuilt since gold's last row;
- the gate validates the days gold rebuilt since the last publish;
- publish loads them once a gate row newer than them passed.

A step that fails before appending its row leaves its work pending, and
every step rewrites whole days, so rerunning any step is safe. The ledger
is the only coupling between steps: any of them can run alone, from a DAG
task, a backfill or a shell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from batch_layer.pipelines import PipelineSpec

__all__ = ["Entry", "Ledger", "ledger_path", "pending_days"]

STEPS = ("silver", "gold", "gate", "publish")


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


def pending_days(entries: list[Entry], upstream: str, downstream: str) -> tuple[date, ...]:
    """Days ``upstream`` covered after ``downstream``'s last entry (all, if it has none).

    >>> t = lambda m: datetime(2024, 1, 1, 0, m, tzinfo=UTC)
    >>> d = lambda n: date(2024, 1, n)
    >>> log = [Entry("silver", "a", t(1), (d(1),)), Entry("gold", "a", t(2), (d(1),)),
    ...        Entry("silver", "b", t(3), (d(2), d(3))), Entry("silver", "c", t(4), (d(3),))]
    >>> pending_days(log, "silver", "gold")
    (datetime.date(2024, 1, 2), datetime.date(2024, 1, 3))
    """
    last = max((e.recorded_at for e in entries if e.step == downstream), default=None)
    days = {
        day
        for e in entries
        if e.step == upstream and e.passed and (last is None or e.recorded_at > last)
        for day in e.days
    }
    return tuple(sorted(days))


def ledger_path(settings: Settings, spec: PipelineSpec) -> str:
    """Where the pipeline's ledger lives: ``<lake root>/_pipelines/<name>/ledger``."""
    return f"{settings.lake.root.rstrip('/')}/_pipelines/{spec.name}/ledger"


class Ledger:
    """Read and append the ledger of one pipeline."""

    def __init__(self, spark: SparkSession, settings: Settings, spec: PipelineSpec) -> None:
        self.spark = spark
        self.path = ledger_path(settings, spec)

    def entries(self) -> list[Entry]:
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.path):
            return []
        rows = self.spark.read.format("delta").load(self.path).orderBy("recorded_at").collect()
        return [
            Entry(
                step=r.step,
                run_id=r.run_id,
                recorded_at=r.recorded_at.astimezone(UTC),  # PySpark: naive local time
                days=tuple(r.days or ()),
                as_of=r.as_of.astimezone(UTC) if r.as_of else None,
                passed=r.passed,
                detail=json.loads(r.detail or "{}"),
            )
            for r in rows
        ]

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
                StructField("step", StringType(), False),
                StructField("run_id", StringType(), False),
                StructField("recorded_at", TimestampType(), False),
                StructField("days", ArrayType(DateType()), False),
                StructField("as_of", TimestampType(), True),
                StructField("passed", BooleanType(), False),
                StructField("detail", StringType(), False),
            ]
        )
        row = (
            entry.step,
            entry.run_id,
            entry.recorded_at,
            list(entry.days),
            entry.as_of,
            entry.passed,
            json.dumps(entry.detail, default=str, sort_keys=True),
        )
        self.spark.createDataFrame([row], schema).write.format("delta").mode("append").save(
            self.path
        )
