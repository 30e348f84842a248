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
