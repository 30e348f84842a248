"""A cancel interrupts a step's thread, but never inside an import: an exception raised there
leaves the module half-initialised for every later step of the server."""

from __future__ import annotations

import ast
import importlib
import sys
import threading
import time
from pathlib import Path

import pytest

from batch_layer.server import (
    STEP_MODULES,
    StepCancelled,
    StepRun,
    StepServer,
    import_step_modules,
    importing,
)
from core.settings import Settings

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def slow_module(tmp_path, monkeypatch):
    """A module whose body waits for ``release`` before it defines ``ready``."""
    name = f"slow_import_{time.monotonic_ns()}"
    (tmp_path / f"{name}.py").write_text(
        "import time\n"
        "import builtins\n"
        "while not builtins._slow_import_release.is_set():\n"
        "    time.sleep(0.005)\n"
        "ready = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    release = threading.Event()
    monkeypatch.setattr("builtins._slow_import_release", release, raising=False)
    yield name, release
    release.set()
    sys.modules.pop(name, None)


def _spin_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


class _Context:
    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def cancelJobGroup(self, group: str) -> None:
        self.cancelled.append(group)


class _Spark:
    def __init__(self) -> None:
        self.sparkContext = _Context()


def test_a_thread_inside_an_import_is_importing_and_one_sleeping_is_not(slow_module):
    name, release = slow_module
    worker = threading.Thread(target=importlib.import_module, args=(name,))
    worker.start()
    _spin_until(lambda: name in sys.modules)
    assert importing(worker.ident)
    release.set()
    worker.join(10)

    asleep = threading.Event()
    sleeper = threading.Thread(target=asleep.wait, args=(10,))
    sleeper.start()
    try:
        assert not importing(sleeper.ident)
    finally:
        asleep.set()
        sleeper.join()
    assert not importing(worker.ident)  # a thread that has ended has no frames


def test_a_cancel_waits_for_the_import_to_finish_then_stops_the_step(slow_module):
    name, release = slow_module
    spark = _Spark()
    server = StepServer(spark, Settings())
    run = StepRun("r1", ["bronze"], "web_events")
    outcome: list[str] = []

    def step() -> None:
        with run.guard:
            run.thread = threading.get_ident()
        try:
            importlib.import_module(name)
            while True:  # Python between Spark jobs: interruptible here
                time.sleep(0.01)
        except StepCancelled:
            outcome.append("cancelled")
        finally:
            run.finished = time.time()

    worker = threading.Thread(target=step)
    worker.start()
    _spin_until(lambda: name in sys.modules)
    server.cancel(run)
    _spin_until(lambda: len(spark.sparkContext.cancelled) >= 3)  # several polls, no interrupt
    assert not run.interrupt_sent and worker.is_alive()

    release.set()
    worker.join(10)
    assert outcome == ["cancelled"] and run.interrupt_sent
    assert sys.modules[name].ready  # the module completed: a later step finds it whole
    assert spark.sparkContext.cancelled[0] == "r1"


def _lazy_imports(path: Path) -> set[str]:
    """The modules a file imports inside its functions."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module)
    return names


def test_the_server_imports_before_serving_what_its_steps_import_later():
    import_step_modules()
    steps = [m for m in STEP_MODULES if m.startswith("batch_layer.")]
    lazy = set().union(*(_lazy_imports(ROOT / f"{m.replace('.', '/')}.py") for m in steps))
    lazy |= _lazy_imports(ROOT / "batch_layer" / "__main__.py")
    assert "great_expectations" in lazy  # the scan reads what it should
    main_only = ("batch_layer.server_http", "core.spark")  # main()'s, before any step
    missing = sorted(n for n in lazy if n not in sys.modules and n not in main_only)
    assert missing == [], missing
