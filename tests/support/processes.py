"""The processes a test looks for under a service it started: its children, their command
lines, whether one still runs, the CPU its threads of one kind used (Linux ``/proc``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["alive", "children", "cmdline", "java_children", "threads_cpu_s"]


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def cmdline(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def java_children(pid: int) -> list[int]:
    """The JVMs ``pid`` started, e.g. the Spark driver of a Python service."""
    return [child for child in children(pid) if "java" in cmdline(child)]


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie, ended but not yet waited for, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def threads_cpu_s(pid: int, name: bytes) -> float:
    """CPU seconds used so far by ``pid``'s threads whose kernel name starts with ``name``
    (a thread that ended no longer counts; 0 for a process that ended)."""
    ticks = 0
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            if (task / "comm").read_bytes().startswith(name):
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")
