"""The JVM profile's reading of Flight Recorder samples: frames parsed, each sample counted once."""

from __future__ import annotations

from collections import Counter

from bench.jvm_profile import OTHER, activity_of, frames_of

PRINTED = """\
jdk.ExecutionSample {
  startTime = 15:58:01.123 (2026-12-03)
  sampledThread = "Executor task launch worker for task 0.0 (TID 3)" (javaThreadId = 88)
  state = "STATE_RUNNABLE"
  stackTrace = [
    org.apache.parquet.column.impl.ColumnWriterV1.write(int, int, int) line: 71
    org.apache.spark.sql.execution.datasources.parquet.ParquetWriteSupport.write(Row) line: 12
    org.apache.spark.executor.Executor$TaskRunner.run() line: 620
    ...
  ]
}

jdk.ExecutionSample {
  startTime = 15:58:01.133 (2026-12-03)
  sampledThread = "Thread-4" (javaThreadId = 31)
  state = "STATE_RUNNABLE"
  stackTrace = [
    java.util.HashMap.putVal(int, Object, Object, boolean, boolean) line: 631
    org.codehaus.janino.UnitCompiler.compile2(Java$Block) line: 1
    org.apache.spark.sql.catalyst.optimizer.Optimizer.execute(LogicalPlan) line: 2
    org.apache.spark.sql.execution.QueryExecution.optimizedPlan() line: 3
    py4j.GatewayConnection.run() line: 4
  ]
}

jdk.ExecutionSample {
  startTime = 15:58:01.143 (2026-12-03)
  sampledThread = "shuffle-boss" (javaThreadId = 40)
  state = "STATE_RUNNABLE"
  stackTrace = [
    sun.nio.ch.EPoll.wait(int, long, int, int) line: 0
    java.lang.Thread.run() line: 833
  ]
}
"""


def test_each_sample_is_its_frames_innermost_first():
    samples = list(frames_of(PRINTED))
    assert [len(frames) for frames in samples] == [3, 5, 2]
    assert samples[0][0] == "org.apache.parquet.column.impl.ColumnWriterV1.write"
    assert samples[1][-1] == "py4j.GatewayConnection.run"


def test_a_sample_counts_once_for_its_most_specific_activity():
    counted = Counter(activity_of(frames) for frames in frames_of(PRINTED))
    # Parquet inside a task is Parquet; code generation inside planning is code generation.
    assert counted == Counter({"Parquet": 1, "code generation": 1, OTHER: 1})
