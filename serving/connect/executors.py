"""The SQL server's executors: JVMs of their own, their tasks below the driver's CPU priority.

In local mode the executors are threads of the driver's JVM: a task that ignores its
cancellation (Java's regex engine never looks at interrupts) kept both cores after the
statement's time limit, every other statement (``SELECT 1`` too: it is a Spark job) waited
for a core, ``/health`` failed and the server was restarted; and a task's out-of-memory error
ended the driver for everyone. So a server whose master is ``local[...]`` runs Spark's
``local-cluster[<executors>,<slots>,<MB>]`` (:func:`cluster_master`): the master and the
worker are threads of the driver's JVM, each executor is a JVM of its own the worker starts,
and Spark's task reaper ends an executor whose cancelled task still runs
``sql.task_kill_timeout_s`` later; the worker starts another (:func:`task_conf`).

:func:`prepare` lays out what the worker needs, under ``<state>/sql/spark``:

- a Spark home (``bin`` and ``jars`` linked from pyspark's folder, a ``work`` folder for the
  executors' logs and fetched jars): the worker writes there, never into the installed
  package;
- ``conf/spark-defaults.conf`` (mode 600, the process's ``SPARK_CONF_DIR``) with a secret
  made at each start (``spark.authenticate``): the master and worker inside the driver take
  orders, and executors, from nobody else on this machine; the secret is on no command line.

:func:`lower_task_priority` renices, every second once the first catalog is built, the
executors' task threads (``Executor task launch worker``, pooled and reused) to
``sql.executor_nice``: the analysts' work runs below the driver's gRPC, planning and
``/health``, while an executor's start, heartbeats and block transfers keep the driver's
priority (an executor started again serves within seconds on a busy machine; one started
whole at ``nice 10`` took minutes there).

A server on a cluster (``spark.master`` ``spark://``, ``yarn``, ``k8s://``) keeps it: its
executors are the cluster's, and the task reaper holds there too.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from core.settings import Settings, SqlSettings
from core.spark import LOCAL_LOG4J2

__all__ = [
    "EXECUTOR_CLASS",
    "cluster_master",
    "executor_processes",
    "lower_task_priority",
    "megabytes",
    "prepare",
    "task_conf",
]

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
"""The main class of an executor's JVM (how its process is told from the driver's)."""
TASK_THREAD = b"Executor task l"
"""The kernel's name (15 bytes) of an executor's task threads, ``Executor task launch worker``."""
_UNITS = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def megabytes(size: str) -> int:
    """A JVM memory size (``768m``, ``1g``) in MiB.

    >>> megabytes("1g"), megabytes("768m"), megabytes("2048")
    (1024, 768, 2048)
    """
    found = re.fullmatch(r"(\d+)([kmgt]?)b?", size.strip().lower())
    if not found:
        raise ValueError(f"{size!r} is not a memory size: write it as 768m or 1g.")
    return int(int(found.group(1)) * _UNITS[found.group(2) or "m"])


def cluster_master(settings: Settings) -> str | None:
    """``local-cluster[...]`` for a server whose master is ``local[...]``; None on a cluster.

    >>> cluster_master(Settings())
    'local-cluster[3,3,1024]'
    """
    master = settings.spark.master
    if master != "local" and not master.startswith("local["):
        return None
    sql = settings.sql
    return f"local-cluster[{sql.executors},{sql.executor_slots},{megabytes(sql.executor_memory)}]"


def task_conf(sql: SqlSettings) -> dict[str, str]:
    """Settings of the tasks on any master: a cancelled task that goes on running ends its
    executor; a task lost with executors another statement ended is tried twice more. A
    statement whose tasks ignore their cancellation in two executors has both ended at the
    same moment by their reapers: with one retry, another session's task lost with the first
    was retried on the second as it went down (``RejectedExecutionException``) and its
    statement failed; the third attempt finds an executor that stays. (A statement whose
    own tasks end executors by their memory ends at most three, one after another.)"""
    kill_ms = int(sql.task_kill_timeout_s * 1000)
    return {
        "spark.task.reaper.enabled": "true",
        "spark.task.reaper.killTimeout": f"{kill_ms}ms",
        "spark.task.reaper.pollingInterval": f"{max(500, min(2000, kill_ms // 4))}ms",
        "spark.task.maxFailures": "3",
    }


def prepare(settings: Settings, root: Path, jars: tuple[str, ...] = ()) -> dict[str, str]:
    """The ``spark.*`` settings of executors on this machine (``{}`` on a cluster), their Spark
    home and secret written under ``root / "spark"`` and named in this process's environment,
    which the driver's JVM inherits.

    ``jars`` (the connectors' and the guard's) go on the driver's and the executors' class
    path from this machine's disk instead of ``spark.jars``: an executor's first task fetched
    the jars from the driver (64 MB) and could not be interrupted meanwhile; on a machine at
    load 40 that outlasted the task reaper, so a cancelled ``SELECT 1`` ended executors."""
    master = cluster_master(settings)
    if master is None:
        return {}
    import pyspark

    sql, folder = settings.sql, root / "spark"
    home = folder / "home"
    shutil.rmtree(home / "work", ignore_errors=True)  # the previous server's executors' files
    (home / "work").mkdir(parents=True, exist_ok=True)
    package = Path(pyspark.__file__).resolve().parent
    for name in ("bin", "jars"):
        link = home / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(package / name, target_is_directory=True)
    conf_dir = folder / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    defaults = conf_dir / "spark-defaults.conf"
    defaults.touch(mode=0o600)
    defaults.chmod(0o600)
    defaults.write_text(f"spark.authenticate.secret {secrets.token_hex(32)}\n")
    os.environ |= {
        "SPARK_HOME": str(home),
        "SPARK_CONF_DIR": str(conf_dir),
        "SPARK_SCALA_VERSION": "2.13",  # what spark-class's load-spark-env.sh exports
    }
    log4j = f"-Dlog4j2.configurationFile={LOCAL_LOG4J2.as_uri()}" if LOCAL_LOG4J2.exists() else ""
    class_path = ":".join(jars)
    return {
        "spark.master": master,
        "spark.jars": "",
        "spark.driver.extraClassPath": class_path,
        "spark.executor.extraClassPath": class_path,
        "spark.executor.memory": f"{megabytes(sql.executor_memory)}m",
        "spark.authenticate": "true",
        "spark.executor.extraJavaOptions": f"{log4j} -XX:+ExitOnOutOfMemoryError".strip(),
    }


def executor_processes(driver: int) -> list[dict[str, int | None]]:
    """The executor JVMs the driver's JVM (pid ``driver``) started: ``pid``, ``rss_mb``, and
    the ``nice`` of its task threads (None before its first task; Linux ``/proc``; none on a
    cluster)."""
    found = []
    for pid in sorted(_executor_pids(driver)):
        try:
            rss_mb = (
                int(Path(f"/proc/{pid}/statm").read_text().split()[1])
                * os.sysconf("SC_PAGE_SIZE")
                // (1024 * 1024)
            )
        except (OSError, IndexError, ValueError):
            continue
        nice = None
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError, IndexError, ValueError):
                if (task / "comm").read_bytes().startswith(TASK_THREAD):
                    stat = (task / "stat").read_text().rsplit(")", 1)[1].split()
                    nice = max(nice or 0, int(stat[16]))
        found.append({"pid": pid, "rss_mb": rss_mb, "nice": nice})
    return found


def _executor_pids(driver: int) -> list[int]:
    pids = []
    for children in Path(f"/proc/{driver}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            pids += [int(pid) for pid in children.read_text().split()]
    return [pid for pid in pids if _is_executor(pid)]


def _is_executor(pid: int) -> bool:
    try:
        return EXECUTOR_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def lower_tasks_once(driver: int, nice: int, done: set[tuple[int, int]]) -> int:
    """Renice the task threads of the driver's executors not yet in ``done`` (pairs of pid and
    thread id, updated) to ``nice``; how many were reniced."""
    lowered, live = 0, set()
    for pid in _executor_pids(driver):
        for task in Path(f"/proc/{pid}/task").iterdir():
            key = (pid, int(task.name))
            live.add(key)
            if key in done:
                continue
            try:
                if (task / "comm").read_bytes().startswith(TASK_THREAD):
                    os.setpriority(os.PRIO_PROCESS, key[1], nice)
                    lowered += 1
                    done.add(key)
            except OSError:
                continue  # the thread ended
    done &= live
    return lowered


def lower_task_priority(
    driver: int, nice: int, stop: threading.Event, ready: Callable[[], bool]
) -> threading.Thread:
    """A daemon thread renicing the driver's executors' task threads every second, once
    ``ready()`` (the first catalog is built), until ``stop``; a task thread started in between
    runs at most a second at the driver's priority. The first catalog build is the server's
    largest work, and on a machine busy with other programs' work its tasks at ``nice 10``
    outlasted the supervisor's start time (three restarts in a row)."""

    def run() -> None:
        done: set[tuple[int, int]] = set()
        while not stop.wait(1.0):
            if ready():
                lower_tasks_once(driver, nice, done)

    thread = threading.Thread(target=run, name="sql-task-priority", daemon=True)
    thread.start()
    return thread
