"""Nothing outside a pipeline's own files names it: every layer reads the declarations.

A pipeline owns its declaration (``pipelines/declared/<name>.py``), its contract
(``data_contracts/<contract>/``), its view modules and its simulator
(``pipelines/simulators/<name>.py``). Any other module of the platform that held a
pipeline's or its contract's name as a string (``"web_events"``, ``"checkouts_ingest"``)
would have to be edited for the next pipeline. Docstrings and doctests may show one as an
example; the demo drives the shipped pipelines by name on purpose.
"""

from __future__ import annotations

import ast

from core.settings import PROJECT_ROOT
from pipelines import PIPELINES

LAYERS = (
    "core",
    "ingest",
    "speed_layer",
    "batch_layer",
    "serving",
    "layout",
    "platformctl",
    "dags",
    "data_contracts",
    "views",
    "pipelines",
)
OWN = ("pipelines/declared", "pipelines/simulators")
"""Files that belong to one pipeline (its views are matched by the view's module name)."""
DEMO = ("platformctl/demo.py",)
"""The demo sends traffic to the shipped pipelines and reads their answers by name."""


def _documentation(tree: ast.AST) -> set[int]:
    """The string constants that are docstrings (of modules, classes, functions, attributes)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def _named(text: str, names: set[str]) -> bool:
    return any(text == n or text.startswith((f"{n}_", f"{n}.")) for n in names)


def test_no_module_outside_a_pipeline_s_own_files_names_a_pipeline():
    names = {spec.name for spec in PIPELINES} | {spec.contract for spec in PIPELINES}
    own_views = {view for spec in PIPELINES for view in spec.views}
    found = []
    for layer in LAYERS:
        for path in sorted((PROJECT_ROOT / layer).rglob("*.py")):
            relative = path.relative_to(PROJECT_ROOT).as_posix()
            if relative.startswith(OWN) or relative in DEMO or path.stem in own_views:
                continue
            tree = ast.parse(path.read_text(), relative)
            documentation = _documentation(tree)
            found += [
                f"{relative}:{node.lineno}: {node.value!r}"
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in documentation
                and _named(node.value, names)
            ]
    assert not found, "read the pipeline from pipelines/ instead:\n" + "\n".join(found)


def test_the_check_finds_a_module_that_names_one():
    source = 'TOPIC = "web_events"\n"""An attribute docstring may say web_events."""\n'
    tree = ast.parse(source)
    documentation = _documentation(tree)
    hits = [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and id(node) not in documentation
        and _named(node.value, {"web_events"})
    ]
    assert hits == ["web_events"]
