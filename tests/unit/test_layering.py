"""The packages' dependencies point one way: the layers share views, contracts and the layout.

- serving reads Cassandra through ``layout`` and merges with ``views``; it
  imports neither job package, and its process runs without Spark;
- the speed and batch layers do not import each other;
- Airflow is imported only under ``dags/`` and ``platformctl/`` (the Spark
  jobs run without it), and parsing the DAGs imports no Spark.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(package: str) -> dict[str, set[str]]:
    """Per source file of ``package``, the top-level packages it imports (also lazily)."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
    return found


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("serving", {"speed_layer", "batch_layer"}),
        ("speed_layer", {"batch_layer", "serving", "airflow"}),
        ("batch_layer", {"speed_layer", "serving", "airflow"}),
        ("views", {"speed_layer", "batch_layer", "serving", "airflow"}),
        ("layout", {"speed_layer", "batch_layer", "serving", "airflow"}),
        # The declarations every layer reads are owned by none of them.
        ("pipelines", {"speed_layer", "batch_layer", "serving", "ingest", "layout", "airflow"}),
        # Who reads what: asked by serving and the SQL server, owned by neither.
        ("access", {"speed_layer", "batch_layer", "serving", "ingest", "airflow", "pyspark"}),
    ],
)
def test_no_import_crosses_the_layers(package, forbidden):
    crossing = {
        path: sorted(names & forbidden)
        for path, names in _imports(package).items()
        if names & forbidden
    }
    assert crossing == {}


_PACKAGES = (
    "access", "batch_layer", "bench", "core", "dags", "data_contracts", "ingest", "layout",
    "pipelines", "platformctl", "serving", "speed_layer", "views",
)  # fmt: skip


def _main_imports(path: Path) -> list[tuple[str, list[str]]]:
    """What ``path`` imports from any ``__main__`` module: (the module, the names)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.split(".")[-1] == "__main__"]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[-1] == "__main__":
                found.append((node.module, [a.name for a in node.names]))
            elif any(a.name == "__main__" for a in node.names):
                found.append((f"{node.module}.__main__", []))
    return found


def test_no_module_imports_a_main_module():
    """A ``__main__`` is where a command starts, never a library: code that other modules use
    lives in a module of its own (``batch_layer.cli``, ``speed_layer.cli``). Tests may run a
    command line by its ``main`` and nothing else of it."""
    in_code = {
        str(path.relative_to(ROOT)): found
        for package in _PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (found := _main_imports(path))
    }
    assert in_code == {}
    in_tests = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (found := [(m, n) for m, n in _main_imports(path) if n != ["main"]])
    }
    assert in_tests == {}


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(result.stdout.split())


@pytest.mark.slow
def test_the_serving_app_imports_no_spark():
    loaded = _modules_after("import serving.app")
    assert "pyspark" not in loaded
    assert not {m for m in loaded if m.startswith(("speed_layer", "batch_layer"))}


@pytest.mark.slow
def test_view_specs_and_the_layout_import_without_spark():
    loaded = _modules_after("import views, views.kinds, layout")
    assert "pyspark" not in loaded
