"""Nothing outside a pipeline's own files names it: adding one touches its contract, its
views, its declaration (and its simulator), never a layer.

A derived pipeline's own files are its declaration and its transformation (which names its
inputs). Every Python module of the layers is read as code (its docstrings and comments aside: they
may show a pipeline as an example): no string and no identifier there may be a declared
pipeline's name, contract or topic. The pipeline's own files may, and so may the demo,
which runs the simulators of the two pipelines the platform ships.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.settings import PROJECT_ROOT
from pipelines import DERIVED, PIPELINES

LAYERS = (
    "core",
    "data_contracts",
    "ingest",
    "speed_layer",
    "batch_layer",
    "serving",
    "dags",
    "platformctl",
    "layout",
    "views",
    "pipelines",
    "infra",
    "derived",
)
SHOWCASE = {"platformctl/demo.py", "platformctl/demo_sql.py", "platformctl/demo_site.py"}
"""The demo runs the shipped pipelines' simulators and prints their answers."""


def _own_files() -> set[str]:
    own = set()
    for spec in PIPELINES:
        own |= {f"pipelines/declared/{spec.name}.py", f"pipelines/simulators/{spec.name}.py"}
        own |= {f"views/{view}.py" for view in spec.views}
    for derived in DERIVED:
        own |= {f"pipelines/declared/{derived.name}.py", f"derived/{derived.transform}.py"}
        own.add(f"pipelines/simulators/{derived.name}.py")  # its ground truth
    return own


def _names() -> re.Pattern[str]:
    words = set()
    for spec in PIPELINES:
        words |= {spec.name, spec.contract, *([spec.topic] if spec.topic else [])}
    for derived in DERIVED:
        words |= {derived.name, derived.contract}
    alternatives = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    # A name, alone or starting a longer one ("checkouts_ingest", "web_events.v1").
    return re.compile(rf"(?<![\w.])({alternatives})(?![A-Za-z0-9])")


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string constant and identifier that is not a docstring."""
    docstrings = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docstrings:
                found.append((node.lineno, node.value))
        elif isinstance(node, ast.Name):
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            found.append((node.lineno, node.attr))
    return found


def test_no_module_outside_a_pipeline_s_own_files_names_a_pipeline():
    pattern, skip = _names(), _own_files() | SHOWCASE
    named = []
    for layer in LAYERS:
        for path in sorted((PROJECT_ROOT / layer).rglob("*.py")):
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            if relative in skip:
                continue
            for line, text in _code_strings(ast.parse(path.read_text(), relative)):
                if pattern.search(text):
                    named.append(f"{relative}:{line}: {text[:80]!r}")
    assert not named, "a layer names a pipeline (read it from the declarations):\n" + "\n".join(
        named
    )


def test_the_check_finds_a_pipeline_named_in_code(tmp_path: Path):
    """The check itself: a module naming a declared pipeline in code is found; in its
    docstring it is not."""
    spec = PIPELINES[0]
    source = f'"""An example: {spec.name}."""\nTOPIC = {spec.name!r}\n'
    found = [t for _, t in _code_strings(ast.parse(source)) if _names().search(t)]
    assert found == [spec.name]
    dag = f'DAG = "{spec.name}_ingest"\n'
    assert [t for _, t in _code_strings(ast.parse(dag)) if _names().search(t)] == [dag[7:-2]]
