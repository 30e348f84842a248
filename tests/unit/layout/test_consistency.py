"""Every statement on the platform's tables has its consistency in one table, LOCAL_QUORUM."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from layout import GRAINS, PROGRESS_COLUMNS, RUNS_COLUMNS, PointerTables, ViewTables
from layout.consistency import CONSISTENCY, DEFAULT, consistency_of, statement_kind
from tests.support.web import WEB_VIEWS

ROOT = Path(__file__).resolve().parents[3]
POINTERS = PointerTables("ks")
_VERBS = ("select_", "insert_", "update_", "delete_")


def _pointer_statements() -> dict[str, str]:
    """Every statement :class:`PointerTables` names, the parametrised ones with every column."""
    named = {
        name: getattr(POINTERS, name)
        for name, value in vars(PointerTables).items()
        if isinstance(value, property) and name.startswith(_VERBS)
    }
    methods = {
        "insert_progress": POINTERS.insert_progress(tuple(PROGRESS_COLUMNS)),
        "select_progress": POINTERS.select_progress(tuple(PROGRESS_COLUMNS)),
        "select_progress(*)": POINTERS.select_progress(),
        "select_progress_of": POINTERS.select_progress_of(tuple(PROGRESS_COLUMNS)),
        "update_run": POINTERS.update_run(tuple(RUNS_COLUMNS)),
    }
    callables = {
        name
        for name, value in vars(PointerTables).items()
        if callable(value) and name.startswith(_VERBS)
    }
    assert callables <= {name.split("(")[0] for name in methods}, "a new statement to list here"
    return named | methods


def _view_statements() -> dict[str, str]:
    """Every statement :class:`ViewTables` makes, in both layers, every grain and a version."""
    out = {}
    for spec in WEB_VIEWS:
        measures = [m.name for m in spec.measures]
        for layer, grain, version in [
            *(("batch", grain, 0) for grain in GRAINS),
            ("speed", "minute", 0),
            ("speed", "minute", 3),
        ]:
            tables = ViewTables(spec, "ks", layer, table_version=version, grain=grain)
            for name, cql in {
                "insert_by_key": tables.insert_by_key(),
                "insert_by_minute": tables.insert_by_minute(),
                "select_range": tables.select_range(measures),
                "select_minute": tables.select_minute(measures),
                "select_stored_window": tables.select_stored_window(),
                "delete_minute": tables.delete_minute(),
                "delete_day": tables.delete_day(),
            }.items():
                out[f"{tables.by_key}.{name}"] = cql
    made = {n for n, v in vars(ViewTables).items() if callable(v) and n.startswith(_VERBS)}
    assert made == {name.rsplit(".", 1)[1] for name in out}, "a new statement to list here"
    return out


def _access_statements() -> dict[str, str]:
    """Every statement of the issued tokens' table (:class:`access.store.TokenStore`)."""
    from access.store import TokenStore

    store = TokenStore(None, "ks")  # type: ignore[arg-type]
    return {
        f"access.{name}": getattr(store, name)
        for name, value in vars(TokenStore).items()
        if isinstance(value, property) and name.startswith(_VERBS)
    }


STATEMENTS = _pointer_statements() | _view_statements() | _access_statements()


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_every_statement_has_a_consistency_and_it_gives_read_your_writes(name):
    assert consistency_of(STATEMENTS[name]) == "LOCAL_QUORUM"


def test_every_kind_of_the_table_is_a_kind_some_statement_is():
    kinds = {statement_kind(cql) for cql in STATEMENTS.values()}
    assert kinds == set(CONSISTENCY)
    assert DEFAULT == "LOCAL_QUORUM"


def test_kinds_follow_the_table_and_whether_it_is_read_or_written():
    assert statement_kind(POINTERS.select_speed_versions) == ("speed_pointer", "read")
    assert statement_kind(POINTERS.update_heartbeat) == ("speed_pointer", "write")
    assert statement_kind(POINTERS.insert_boundary) == ("batch_pointer", "write")
    assert statement_kind(POINTERS.select_reconcile) == ("reconcile", "read")
    clicks = ViewTables(WEB_VIEWS[-1], "ks", "speed", table_version=2)
    assert statement_kind(clicks.select_stored_window()) == ("speed_view", "read")
    assert statement_kind(clicks.delete_day()) == ("speed_view", "write")


def test_a_statement_outside_the_layout_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="not one of the platform's tables; declare it"):
        consistency_of("SELECT * FROM ks.elsewhere WHERE id = ?")
    with pytest.raises(ValueError, match="only SELECT, INSERT, UPDATE or DELETE"):
        consistency_of("CREATE TABLE ks.speed_x (a int PRIMARY KEY)")


def _prepare_calls(package: str) -> list[str]:
    """``<module>:<line>`` of every ``<something>.prepare(...)`` call under ``package``."""
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "prepare"
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


@pytest.mark.parametrize("package", ["speed_layer", "layout"])
def test_the_speed_layer_and_the_layout_prepare_only_through_the_one_place(package):
    """Their statements get their consistency from the table: prepared by
    ``core.cassandra.prepare``, never by a session's own ``prepare``."""
    assert _prepare_calls(package) == []
