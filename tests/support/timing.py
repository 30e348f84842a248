"""Where a run's time goes, by test module: printed after pytest's slowest tests.

``--durations`` names the slowest phases one by one; a module whose many tests each take
a few seconds never shows there, and a module-scoped fixture's cost lands on whichever test
ran first. Summed by module (setup, call and teardown of every test in it), the total says
which module to make cheaper. Under xdist, :class:`WorkerTimes` says how long each worker
was busy and when it ran out of tests.

Under xdist a failure shows as an ``F`` among the dots until the run ends, most of an hour
later; :class:`FailuresAsTheyHappen` names the test on a line of its own when it fails.
"""

from __future__ import annotations

from collections import Counter

import pytest

__all__ = ["FailuresAsTheyHappen", "ModuleTimes", "WorkerTimes"]


class ModuleTimes:
    """A pytest plugin: seconds and tests per module, over every phase of every test."""

    def __init__(self, shown: int = 15) -> None:
        self.shown = shown
        self.seconds: Counter[str] = Counter()
        self.tests: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        module = report.nodeid.split("::", 1)[0]
        self.seconds[module] += report.duration
        if report.when == "call":
            self.tests[module] += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        total = sum(self.seconds.values())
        if total < 60:  # a run of a few tests: nothing to read
            return
        terminalreporter.section(f"slowest {self.shown} modules (of {total:.0f}s in tests)")
        for module, seconds in self.seconds.most_common(self.shown):
            share = 100 * seconds / total
            terminalreporter.write_line(
                f"{seconds:8.1f}s {share:5.1f}% {self.tests[module]:4d} tests  {module}"
            )


class WorkerTimes:
    """A pytest plugin: under xdist, when each worker ran its last test and how long it was
    busy, with the tests it ended on.

    A parallel run lasts as long as its last worker: a worker that ran out of work while the
    other still ran a long test left a core idle for the difference, which no per-test or
    per-module figure shows.
    """

    def __init__(self, last: int = 3) -> None:
        self.last = last
        self.first_start: float | None = None
        self.busy: Counter[str] = Counter()
        self.ended: dict[str, float] = {}
        self.tail: dict[str, list[tuple[float, str]]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        node = getattr(report, "node", None)
        if node is None:  # not a worker's report (no xdist)
            return
        worker = node.gateway.id
        self.busy[worker] += report.duration
        self.first_start = min(report.start, self.first_start or report.start)
        self.ended[worker] = max(report.stop, self.ended.get(worker, report.stop))
        if report.when == "call" or report.failed:
            tail = self.tail.setdefault(worker, [])
            tail.append((report.stop, report.nodeid))
            del tail[: -self.last]

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if len(self.ended) < 2 or self.first_start is None:
            return
        latest = max(self.ended.values())
        terminalreporter.section("workers (seconds from the first test's start)")
        for worker in sorted(self.ended):
            ended = self.ended[worker] - self.first_start
            idle = latest - self.ended[worker]
            terminalreporter.write_line(
                f"{worker}: busy {self.busy[worker]:7.1f}s, last test ended at {ended:7.1f}s"
                f" ({idle:.0f}s before the run's end); it ended on:"
            )
            for stop, nodeid in self.tail.get(worker, ()):
                terminalreporter.write_line(f"    {stop - self.first_start:7.1f}s  {nodeid}")


class FailuresAsTheyHappen:
    """A pytest plugin: the id of a test that failed or errored, printed when its report
    arrives, so a long run's failures can be looked at while it goes on."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.failed and reporter is not None:
            what = "FAILED" if report.when == "call" else f"ERROR at {report.when}"
            reporter.write("\n")  # after the progress line's F or E
            reporter.write_line(f"{what} {report.nodeid} ({report.duration:.1f}s)", red=True)
