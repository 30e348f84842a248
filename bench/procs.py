"""What a process group (a job's Python driver and its JVM) uses, read from ``/proc``."""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["all_stats", "group_cpu_seconds", "group_rss_mb"]


def all_stats() -> Iterator[tuple[int, list[str]]]:
    """``(pid, the /proc/<pid>/stat fields after the command name)`` of every process (one
    that ends while they are read is left out): field 1 is the parent, 2 the process group,
    11 and 12 the user and system CPU ticks, 19 the start time, 21 the resident pages."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                yield int(entry), stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue


def _group_stats(pgid: int) -> Iterator[list[str]]:
    """The ``/proc/<pid>/stat`` fields after the command name, of each process in the group."""
    return (fields for _, fields in all_stats() if int(fields[2]) == pgid)


def group_cpu_seconds(pgid: int) -> float:
    """User + system CPU of every process in a process group."""
    tick = os.sysconf("SC_CLK_TCK")
    return sum((int(f[11]) + int(f[12])) / tick for f in _group_stats(pgid))


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group, MB."""
    page = os.sysconf("SC_PAGE_SIZE")
    return round(sum(int(f[21]) * page for f in _group_stats(pgid)) / 2**20, 1)
