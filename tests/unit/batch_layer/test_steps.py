"""Every place that names a batch step names one of the steps' table (batch_layer/steps.py):
the named sequences, the DAG factory's chains, the step server and the command line.

The DAG factory imports Airflow, which this environment does not have: its source is read
instead, so a chain or a task naming a step the table lacks fails here, not at parse time
in Airflow's DAG processor.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from batch_layer import steps
from batch_layer.cli import step_parser
from batch_layer.steps import SEQUENCES, STEPS

ROOT = Path(__file__).resolve().parents[3]
FACTORY = ROOT / "dags" / "pipeline_factory.py"


def test_every_named_sequence_names_steps_of_the_table():
    unknown = {name: [s for s in seq if s not in STEPS] for name, seq in SEQUENCES.items()}
    assert unknown == {name: [] for name in SEQUENCES}
    assert set(steps.THROUGH_PUBLISH) <= set(STEPS)


def _named_steps(node: ast.AST) -> list[str] | None:
    """The step names an argument of ``_chain``/``_step`` stands for: a sequence of the table
    by its name, or literal names; None for anything else (which the test refuses)."""
    if isinstance(node, ast.Name) and hasattr(steps, node.id):
        return list(getattr(steps, node.id))
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List):
        found = [_named_steps(element) for element in node.elts]
        if all(f is not None for f in found):
            return [name for names in found for name in names]  # type: ignore[union-attr]
    if isinstance(node, ast.Starred):
        return _named_steps(node.value)
    return None


def _factory_calls() -> list[tuple[str, int, list[str] | None]]:
    """Each ``_chain(settings, spec, STEPS...)`` and ``_step(settings, spec, NAME)`` call of the
    DAG factory, with the names its step argument stands for, and each ``extra={...}`` key."""
    tree = ast.parse(FACTORY.read_text(encoding="utf-8"))
    calls = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        if node.func.id in {"_chain", "_step"} and len(node.args) >= 3:
            calls.append((node.func.id, node.lineno, _named_steps(node.args[2])))
        for keyword in node.keywords:
            if node.func.id == "_chain" and keyword.arg == "extra":
                assert isinstance(keyword.value, ast.Dict)
                keys = [_named_steps(k) for k in keyword.value.keys if k is not None]
                calls += [("extra", node.lineno, k) for k in keys]
    return calls


def test_the_dag_chains_name_steps_of_the_table():
    calls = _factory_calls()
    assert sum(kind == "_chain" for kind, _, _ in calls) >= 5, "the five DAGs' chains"
    unreadable = [(kind, line) for kind, line, names in calls if names is None and kind != "_step"]
    assert unreadable == [], "a chain whose steps are neither a sequence of the table nor names"
    unknown = [
        (kind, line, name)
        for kind, line, names in calls
        for name in names or ()
        if name not in STEPS
    ]
    assert unknown == []


def test_the_step_server_imports_what_every_step_of_the_table_needs():
    from batch_layer.server import STEP_MODULES

    needed = {module for step in STEPS.values() for module in step.modules}
    assert needed <= set(STEP_MODULES)


def test_the_command_line_offers_the_table_s_steps_and_no_other():
    parser = step_parser()
    (action,) = [a for a in parser._actions if a.dest == "step"]
    assert list(action.choices) == [*STEPS, "all"]


@pytest.mark.parametrize("name", ["reprocess", "check_bronze", "Gold"])
def test_a_step_the_table_does_not_have_is_refused_by_the_command_line(name, capsys):
    with pytest.raises(SystemExit) as exited:
        step_parser().parse_args([name])
    assert exited.value.code == 2
    assert f"invalid choice: '{name}'" in capsys.readouterr().err
