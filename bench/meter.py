"""Wall time, the Spark JVM's CPU, the rest of the machine's CPU and the Spark jobs of a block.

The jobs are counted from the driver's status tracker: every job id Spark gave
out while the block ran (the benchmarks set no job group).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Meter", "jvm_memory"]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_busy_seconds() -> float:
    """CPU seconds every core of the machine spent busy (not idle, not iowait)."""
    with open("/proc/stat") as stat:
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(
            int, stat.readline().split()[1:9]
        )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


_POOLS = (
    "Metaspace",
    "Compressed Class Space",
    "CodeHeap 'non-profiled nmethods'",
    "CodeHeap 'profiled nmethods'",
    "CodeHeap 'non-nmethods'",
)


def jvm_memory(spark: Any) -> dict[str, float]:
    """The driver JVM's class and code memory: MiB used per pool (metaspace, compressed class
    space, the code cache), the heap used, and the classes loaded since the JVM started."""
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    out: dict[str, float] = {}
    for pool in management.getMemoryPoolMXBeans():
        if pool.getName() in _POOLS:
            out[str(pool.getName())] = round(pool.getUsage().getUsed() / 2**20, 1)
    out["heap"] = round(management.getMemoryMXBean().getHeapMemoryUsage().getUsed() / 2**20, 1)
    out["classes_loaded"] = int(management.getClassLoadingMXBean().getTotalLoadedClassCount())
    out["classes_unloaded"] = int(management.getClassLoadingMXBean().getUnloadedClassCount())
    return out


class Meter:
    """Wall time, the Spark JVM's CPU, everything else's CPU and Spark jobs of a block."""

    def __init__(self, spark: Any) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        self._last_job = self._max_job()
        self.load: list[float] = []
        self._stop = threading.Event()
        threading.Thread(target=self._sample_load, daemon=True).start()

    def _max_job(self) -> int:
        # The bench sets no job group: every job is in the None group, ids in order.
        return max(self._tracker.getJobIdsForGroup(None) or [-1])

    def _sample_load(self) -> None:
        while not self._stop.wait(10):
            self.load.append(os.getloadavg()[0])

    def stop(self) -> None:
        self._stop.set()

    @contextmanager
    def measure(self, into: dict) -> Iterator[None]:
        jvm, busy, started = _cpu_seconds(self._pid), _machine_busy_seconds(), time.perf_counter()
        yield
        seconds = time.perf_counter() - started
        jvm = _cpu_seconds(self._pid) - jvm
        busy = _machine_busy_seconds() - busy
        last = self._max_job()
        into |= {
            "seconds": round(seconds, 2),
            "jvm_cores": round(jvm / seconds, 2),
            "other_cores": round(max(0.0, busy - jvm) / seconds, 2),
            "jobs": last - self._last_job,
        }
        self._last_job = last
