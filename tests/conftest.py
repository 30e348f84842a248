"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from core.settings import Settings, load_settings
from core.spark import C1_ONLY

# Two shuffle partitions (the cores of the machine the suite is sized for) unless WAP_*
# says otherwise: every test's data is small, and each partition is a task in every stage
# of every Spark job. Set before any settings load, so the processes tests start see it too.
os.environ.setdefault("WAP_SPARK__SHUFFLE_PARTITIONS", "2")
# Spark evaluates the tests' few hundred rows with interpreted expressions (the path Spark's
# own suites run besides the generated one): generating and compiling code for each new
# query, then JIT-compiling that, costs more than the rows. One seven-step pipeline run over
# 300 events: 174 -> 131 CPU seconds in a new JVM, 60-78 -> 54-58 once warm. Plans, results
# and the code a deployment runs are unchanged (`make demo` and the benchmarks generate code).
os.environ.setdefault(
    "WAP_SPARK__EXTRA_CONF",
    json.dumps(
        {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
    ),
)
# The Spark drivers tests start (speed jobs, step servers, SQL servers) live a minute or two:
# the optimising JIT compiler (C2) costs them more CPU than its code gives back, and the
# suite's two cores are its limit. A pipeline's first run in a new driver: 131 -> 102 CPU
# seconds. The ``spark`` fixture's driver lives the whole run and keeps it. (C1_ONLY keeps
# the code cache a tiered JVM has: at C1's 48 MB a step server's driver stopped compiling
# and died within a pipeline run.)
os.environ.setdefault("WAP_SPARK__DRIVER_JAVA_OPTIONS", C1_ONLY)
# The same for the executors of the Spark standalone cluster's tests, which live as long as
# their application: those tests' executors took a third of the CPU of the cluster tests.
os.environ.setdefault("WAP_SPARK__EXECUTOR_JAVA_OPTIONS", C1_ONLY)
# One node: a request reaches a replica whatever the driver knows, so sessions read no schema
# when they connect. The node holds hundreds of the tests' tables, and tests connect
# thousands of times (a poll of a watermark opens a session): each read of every table's
# columns cost the node 0.03 and the client 0.07 CPU seconds. The ring's test routes by
# token, as clusters do.
os.environ.setdefault("WAP_CASSANDRA__TOKEN_AWARE", "false")
# Speed jobs stream the web pipeline their test sends events to; a test of another pipeline
# (or of several) names them in its settings.
os.environ.setdefault("WAP_SPEED__PIPELINES", '["web_events"]')
from tests.support.platform import STARTED_BY_TESTS, join_runs, leave_runs

LONG_LIVED_DRIVER = " ".join(
    [
        "-XX:+UseParallelGC",
        "-XX:Tier4InvocationThreshold=50000",
        "-XX:Tier4MinInvocationThreshold=6000",
        "-XX:Tier4CompileThreshold=60000",
        "-XX:Tier4BackEdgeThreshold=400000",
    ]
)
"""The JVM options of the ``spark`` fixture's driver, which lives the whole run: the parallel
collector (G1's concurrent threads and write barriers are a cost two busy cores pay), and C2
only for methods ten times hotter than its default (a CPU profile of four pipeline runs put
35% of the driver's CPU in C2 compiling Spark's and Delta's planning code, which each query
runs a few times). Four pipeline runs over 300 events: about 276 -> 215 CPU seconds."""


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controlling process sees every report
        from tests.support.timing import FailuresAsTheyHappen, ModuleTimes, WorkerTimes

        config.pluginmanager.register(ModuleTimes(), "module-times")
        config.pluginmanager.register(WorkerTimes(), "worker-times")
        config.pluginmanager.register(FailuresAsTheyHappen(config), "failures-now")
        join_runs()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--keep-platform",
        action="store_true",
        help="leave the services this run started running (a later run stops them)",
    )


_SHARED_SCOPES = {"class", "module", "package"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (``make test``), the tests of a module with a module-scoped
    fixture (a published lake, a served API) run on one worker, so it is built once; a group
    named with ``pytest.mark.xdist_group`` keeps several modules together (one session
    fixture). Any other test goes to whichever worker is free."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        fixtures = getattr(item, "_fixtureinfo", None)
        definitions = fixtures.name2fixturedefs.values() if fixtures else ()
        if any(d.scope in _SHARED_SCOPES for defs in definitions for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop what the runs started, once every worker is done (in the controlling process)
    and no other test run is still using the services (a second run in another terminal
    ending first must not stop the first run's Kafka)."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    last = leave_runs()
    if config.getoption("--keep-platform") or not last or not STARTED_BY_TESTS.exists():
        return
    from platformctl import platform

    names = tuple(dict.fromkeys(STARTED_BY_TESTS.read_text().split()))
    STARTED_BY_TESTS.unlink()
    platform.down(load_settings(), names)


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The settings the suite runs with: local defaults unless WAP_* says otherwise."""
    return load_settings()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A name no other test uses: for topics, keyspaces, tables and paths."""
    test = "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:24]
    return f"t_{test}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def spark(settings: Settings):
    """The one local SparkSession of the test run (Delta, Kafka connector, RocksDB).

    Every test that needs Spark uses this fixture: a JVM holds one session
    config, so a second, differently configured session would silently be
    the first one.
    """
    from core.spark import build_spark_session

    long_lived = settings.spark.model_copy(update={"driver_java_options": LONG_LIVED_DRIVER})
    session = build_spark_session(
        settings.model_copy(update={"spark": long_lived}), app_name="tests"
    )
    yield session
    session.stop()
