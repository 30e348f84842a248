"""Where a run's time goes, by test module: printed after pytest's slowest tests.

``--durations`` names the slowest phases one by one; a module whose many tests each take
a few seconds never shows there, and a module-scoped fixture's cost lands on whichever test
ran first. Summed by module (setup, call and teardown of every test in it), the total says
which module to make cheaper.

Under xdist a failure shows as an ``F`` among the dots until the run ends, most of an hour
later; :class:`FailuresAsTheyHappen` names the test on a line of its own when it fails.
"""

from __future__ import annotations

from collections import Counter

import pytest

__all__ = ["FailuresAsTheyHappen", "ModuleTimes"]


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
