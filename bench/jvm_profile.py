"""Where a Spark driver's JVM spends its CPU: Flight Recorder, started and stopped from Python.

:class:`Profiler` records the JVM of a SparkSession (in local mode the driver and its
executor threads are one JVM) with the JDK's own Flight Recorder (``jdk.jfr``, its
execution samples alone: a stack of every running Java thread each 10 ms, at little cost
to the JVM, where the ``profile`` settings' allocation and lock events doubled a step's
CPU), one recording per :meth:`Profiler.record` block, and sorts the samples into what the JVM was
doing (:data:`ACTIVITIES`): each sample counts once, for the first activity one of its
frames belongs to, so code generation inside planning counts as code generation, a
Parquet write inside a task as Parquet. The JDK's ``jfr`` tool reads the recordings; no
agent or download is needed.

Samples are of Java code only: the JVM's garbage collection and JIT compiler threads,
and the Python driver, are not in them (the benchmarks' CPU seconds are).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["ACTIVITIES", "Profiler", "activity_of", "caller_of", "frames_of"]

ACTIVITIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "code generation",
        (
            "org.codehaus.janino.",
            "org.codehaus.commons.compiler.",
            "org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator",
        ),
    ),
    ("JSON parsing", ("com.fasterxml.jackson.core.", "org.apache.spark.sql.catalyst.json.")),
    ("Parquet", ("org.apache.parquet.", "org.apache.spark.sql.execution.datasources.parquet.")),
    ("Kafka", ("org.apache.kafka.", "org.apache.spark.sql.kafka010.")),
    (
        "Delta log and snapshots",
        (
            "org.apache.spark.sql.delta.Snapshot",
            "org.apache.spark.sql.delta.DeltaLog",
            "org.apache.spark.sql.delta.SnapshotManagement",
            "org.apache.spark.sql.delta.OptimisticTransaction",
            "org.apache.spark.sql.delta.stats.",
            "org.apache.spark.sql.delta.storage.",
            "org.apache.spark.sql.delta.actions.",
            "org.apache.spark.sql.delta.Checksum",
            "org.apache.spark.sql.delta.checkpoint",
        ),
    ),
    (
        "query planning",
        (
            "org.apache.spark.sql.catalyst.analysis.",
            "org.apache.spark.sql.catalyst.optimizer.",
            "org.apache.spark.sql.catalyst.rules.",
            "org.apache.spark.sql.catalyst.planning.",
            "org.apache.spark.sql.execution.QueryExecution",
            "org.apache.spark.sql.execution.SparkStrategies",
            "org.apache.spark.sql.execution.SparkPlanner",
            "org.apache.spark.sql.execution.adaptive.",
            "org.apache.spark.sql.Dataset",
        ),
    ),
    ("tasks", ("org.apache.spark.executor.", "org.apache.spark.scheduler.Task")),
    ("scheduling and RPC", ("org.apache.spark.scheduler.", "org.apache.spark.rpc.", "io.netty.")),
    ("Python calls (py4j)", ("py4j.",)),
)
"""(activity, frame prefixes), the first that matches a sample wins: the more specific first."""

OTHER = "other"

CALLER_PREFIXES = ("org.apache.spark.", "io.delta.", "org.apache.hadoop.", "org.apache.parquet.")
"""A sample's caller: its innermost frame of Spark, Delta, Hadoop or Parquet (a regex or a
class lookup of the JDK's says little alone)."""


def frames_of(printed: str) -> Iterator[list[str]]:
    """Each sample's frames (``package.Class.method``, innermost first) in the text
    ``jfr print --events jdk.ExecutionSample`` prints.

    >>> text = '''jdk.ExecutionSample {
    ...   stackTrace = [
    ...     java.util.HashMap.get(Object) line: 556
    ...     org.codehaus.janino.UnitCompiler.compile(Java$Rvalue) line: 9
    ...     ...
    ...   ]
    ... }'''
    >>> list(frames_of(text))
    [['java.util.HashMap.get', 'org.codehaus.janino.UnitCompiler.compile']]
    """
    frames: list[str] | None = None
    for line in printed.splitlines():
        stripped = line.strip()
        if stripped.startswith("stackTrace = ["):
            frames = []
        elif frames is not None and stripped == "]":
            yield frames
            frames = None
        elif frames is not None and "(" in stripped:
            frames.append(stripped.split("(", 1)[0])


def caller_of(frames: list[str]) -> str:
    """The innermost of ``frames`` in Spark, Delta, Hadoop or Parquet (else the innermost).

    >>> caller_of(["java.util.regex.Pattern.match", "org.apache.spark.util.Utils.redact"])
    'org.apache.spark.util.Utils.redact'
    """
    return next((f for f in frames if f.startswith(CALLER_PREFIXES)), frames[0] if frames else "")


def activity_of(frames: list[str]) -> str:
    """The activity a sample's ``frames`` count for (:data:`ACTIVITIES`).

    >>> activity_of(["java.util.HashMap.get", "org.apache.spark.sql.delta.Snapshot.x"])
    'Delta log and snapshots'
    >>> activity_of(["java.lang.Thread.run"])
    'other'
    """
    for activity, prefixes in ACTIVITIES:
        if any(frame.startswith(prefixes) for frame in frames):
            return activity
    return OTHER


class Profiler:
    """Flight Recorder recordings of ``spark``'s JVM, one per :meth:`record` block, and the
    activities of their samples by block name (:attr:`samples`)."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark.sparkContext._jvm
        self._jfr = shutil.which("jfr") or str(Path(_java_home(self._jvm)) / "bin" / "jfr")
        self._dir = Path(tempfile.mkdtemp(prefix="jvm-profile-"))
        self.samples: dict[str, Counter[str]] = {}
        self.methods: dict[str, Counter[str]] = {}
        """Per block name, the samples' innermost frames: the methods the JVM was in."""
        self.callers: dict[str, Counter[str]] = {}
        """Per block name, the samples' callers (:func:`caller_of`)."""

    @contextmanager
    def record(self, name: str) -> Iterator[None]:
        """Record the JVM while the block runs; its samples count under ``name``."""
        recording = self._jvm.jdk.jfr.Recording()
        every = self._jvm.java.time.Duration.ofMillis(10)
        recording.enable("jdk.ExecutionSample").withPeriod(every).withStackTrace()
        recording.start()
        try:
            yield
        finally:
            recording.stop()
            path = self._dir / f"{len(list(self._dir.iterdir()))}.jfr"
            recording.dump(self._jvm.java.io.File(str(path)).toPath())
            recording.close()
            self._count(name, path)
            path.unlink()

    def _count(self, name: str, path: Path) -> None:
        printed = subprocess.run(
            [self._jfr, "print", "--events", "jdk.ExecutionSample", "--stack-depth", "96", path],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        activities = self.samples.setdefault(name, Counter())
        methods = self.methods.setdefault(name, Counter())
        callers = self.callers.setdefault(name, Counter())
        for frames in frames_of(printed):
            activities[activity_of(frames)] += 1
            if frames:
                methods[frames[0]] += 1
                callers[caller_of(frames)] += 1

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


def _java_home(jvm: Any) -> str:
    return str(jvm.java.lang.System.getProperty("java.home"))
