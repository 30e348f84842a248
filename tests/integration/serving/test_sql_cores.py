"""No analyst's statement takes the SQL server's cores from the others.

A real ``python -m serving.connect --supervise`` (the session's, over the published
lake) is sent, from the analyst's virtualenv (``sql_hogs.py``: ``pyspark-client``
only), a statement that holds cores: a regex whose backtracking ignores interrupts,
or a cartesian join. Meanwhile two other sessions run, one after another: ``SELECT 1``
every half second and a small aggregate every second, through the statement, its
cancellation and the seconds after (an executor whose task ignored its cancellation is
ended then, and started again). Every one of them must answer, each must have answered
at least once while the statement still held its tasks (not only once it ended), and
the server must not be restarted: the supervisor logs no restart and the driver is the
same process. How long the others took during each statement is a figure of
``bench.sql_attacks`` (docs/benchmarks.md), not a bound here: on a machine shared with
the rest of the suite a wait says more about the machine than about the server.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.support.analyst import run_analyst_script
from tests.support.lake import GROUP
from tests.support.processes import children, java_children

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

HOGS = Path(__file__).with_name("sql_hogs.py")
AFTER_S = 40.0
"""How long the others go on measuring after the statement ended: the time a cancelled task
that goes on running is given (``sql.task_kill_timeout_s``, 30 s), the reaper's rounds, and
an executor started again."""


def _driver(sql_server) -> int:
    """The pid of the server's driver JVM (the supervisor's child's only JVM child)."""
    (server,) = children(sql_server.process.pid)
    (driver,) = java_children(server)
    return driver


def _restarts(sql_server) -> int:
    return sql_server.log.read_text(errors="replace").count("sql.supervisor.restarting")


def _wait_answering(sql_server, timeout_s: float = 300) -> None:
    """Until ``/health`` is 200 ``ok`` (a test before may have left it restarting)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if sql_server.health().get("status") == "ok":
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    pytest.fail(f"the SQL server did not answer:\n{sql_server.log.read_text()[-3000:]}")


def _hog(python: Path, sql_server, folder: Path, statement: str) -> dict:
    """``statement`` (a name of ``sql_hogs.HOGS``) run while the others measure: the answer."""
    _wait_answering(sql_server)
    job = {"url": sql_server.settings.sql.url(), "statement": statement, "after_s": AFTER_S}
    driver, restarts = _driver(sql_server), _restarts(sql_server)
    answer = run_analyst_script(python, HOGS, folder / f"{statement}.json", job)
    assert _restarts(sql_server) == restarts, f"the server was restarted during {statement}"
    assert _driver(sql_server) == driver, f"the driver is another process after {statement}"
    return answer


def _assert_the_others_answered(answer: dict) -> None:
    """Each of the others answered every time, and at least once while the statement ran:
    begun and answered before it ended (a scheduler that left them no slot, or a server
    that stopped answering, would have them answer only after it, or fail)."""
    ran_s = answer["hog"]["seconds"]
    for name in ("select1", "small"):
        runs = answer[name]
        assert len(runs) >= 10, f"too few {name} measured: {runs}"
        failed = [run for run in runs if run["error"]]
        assert not failed, f"{name} failed during the statement: {failed[:3]}"
        during = [run for run in runs if run["at"] + run["seconds"] < ran_s]
        assert during, f"no {name} answered during the statement's {ran_s} s: {runs[:5]}"


def test_a_regex_that_ignores_interrupts_costs_an_executor_not_the_server(
    sql_server, client_python, tmp_path
):
    """Its two tasks ran on after the time limit (the regex engine never looks at
    interrupts), holding both cores: another session's small job waited and failed,
    /health failed and the supervisor restarted the server."""
    answer = _hog(client_python, sql_server, tmp_path, "regex")
    assert "time limit" in (answer["hog"]["error"] or ""), answer["hog"]
    _assert_the_others_answered(answer)


def test_a_cartesian_join_leaves_the_others_answering(sql_server, client_python, tmp_path):
    """It held both cores for its 28 s: another session's SELECT 1 took 13.5 s (in the
    benchmark, 20.9 s); now its tasks take some of the executors' slots, the others'
    jobs the rest."""
    answer = _hog(client_python, sql_server, tmp_path, "cross_join")
    assert answer["hog"]["error"] is None or "time limit" in answer["hog"]["error"], answer
    _assert_the_others_answered(answer)


def test_analysts_tasks_run_in_executors_below_the_drivers_priority(sql_server):
    """The executors are JVMs the driver started, apart from it; their task threads (every
    one that ran a task) run at ``sql.executor_nice``."""
    _wait_answering(sql_server)
    processes = sql_server.health()["processes"]
    assert processes["driver"] == _driver(sql_server)
    executors = processes["executors"]
    assert len(executors) == sql_server.settings.sql.executors, executors
    ran = [executor for executor in executors if executor["nice"] is not None]
    assert ran, f"no executor ran a task: {executors}"
    assert {executor["nice"] for executor in ran} == {sql_server.settings.sql.executor_nice}
