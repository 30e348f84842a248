"""The pointer and bookkeeping tables: their DDL, their statements, the one boundary read."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from core.settings import CassandraSettings
from infra.terraform.cql import parse_create_table
from layout import (
    PROGRESS_COLUMNS,
    PROGRESS_TABLE,
    RECONCILE_COLUMNS,
    RECONCILE_TABLE,
    RUNS_COLUMNS,
    RUNS_TABLE,
    SPEED_VERSIONS_TABLE,
    Boundary,
    PointerTables,
    missing_columns,
    read_boundaries,
    read_speed_versions,
)

POINTERS = PointerTables("ks")


@pytest.fixture(scope="module")
def tables():
    return {t.name: t for t in (parse_create_table(s) for s in POINTERS.create())}


def test_seven_tables_each_created_once_in_the_keyspace(tables):
    assert set(tables) == {
        "batch_days",
        "batch_boundary",
        "batch_superseded",
        PROGRESS_TABLE,
        RUNS_TABLE,
        SPEED_VERSIONS_TABLE,
        RECONCILE_TABLE,
    }
    assert all(s.startswith("CREATE TABLE IF NOT EXISTS ks.") for s in POINTERS.create())


def test_progress_has_one_row_per_view_and_every_declared_column(tables):
    progress = tables[PROGRESS_TABLE]
    assert progress.partition_key == ("view_name",) and progress.clustering_key == ()
    assert dict(progress.columns) == {"view_name": "text", **PROGRESS_COLUMNS}


def test_reconcile_results_have_one_row_per_view_read_and_written_whole(tables):
    results = tables[RECONCILE_TABLE]
    assert results.partition_key == ("view_name",) and results.clustering_key == ()
    assert dict(results.columns) == {"view_name": "text", **RECONCILE_COLUMNS}
    marks = POINTERS.insert_reconcile.split("VALUES")[1].count("?")
    assert marks == 1 + len(RECONCILE_COLUMNS)
    assert "toUnixTimestamp(checked_at)" in POINTERS.select_reconcile


def test_runs_newest_first_per_checkpoint(tables):
    runs = tables[RUNS_TABLE]
    assert runs.partition_key == ("checkpoint_name",)
    assert runs.clustering_key == (("generation", "DESC"),)
    assert dict(runs.columns) == {
        "checkpoint_name": "text",
        "generation": "int",
        **RUNS_COLUMNS,
    }


def test_one_speed_version_pointer_per_view(tables):
    versions = tables[SPEED_VERSIONS_TABLE]
    assert versions.partition_key == ("view_name",) and versions.clustering_key == ()
    assert ("version", "int") in versions.columns


def test_a_run_update_names_only_run_columns():
    assert POINTERS.update_run(["state", "retired_at"]) == (
        "UPDATE ks.speed_runs SET state = ?, retired_at = ? "
        "WHERE checkpoint_name = ? AND generation = ?"
    )
    with pytest.raises(ValueError, match="no columns"):
        POINTERS.update_run(["nope"])


def test_views_never_switched_read_version_zero():
    rows = [SimpleNamespace(view_name="clicks", version=4)]
    session = _Session(lambda _statement, _params: rows)
    assert read_speed_versions(session, "ks", ["clicks", "search_terms"]) == {
        "clicks": 4,
        "search_terms": 0,
    }


def _statements() -> dict[str, str]:
    """Every statement :class:`PointerTables` names as a property."""
    verbs = ("select_", "insert_", "update_", "delete_")
    return {
        name: getattr(POINTERS, name)
        for name, value in vars(PointerTables).items()
        if isinstance(value, property) and name.startswith(verbs)
    }


@pytest.mark.parametrize("name", sorted(_statements()))
def test_every_named_statement_binds_what_it_names(name):
    statement = _statements()[name]
    insert = re.fullmatch(r"INSERT INTO ks\.\w+ \(([^)]*)\) VALUES \(([^)]*)\)", statement)
    if insert:
        assert len(insert.group(1).split(", ")) == len(insert.group(2).split(", "))
    else:
        assert re.match(r"(SELECT .* FROM|UPDATE|DELETE FROM) ks\.\w+( |$)", statement), statement
    assert " ks." in statement


def test_progress_reads_and_writes_name_known_columns():
    assert POINTERS.insert_progress(("batch_id", "rejected_rows")) == (
        "INSERT INTO ks.speed_progress (view_name, batch_id, rejected_rows) VALUES (?, ?, ?)"
    )
    assert POINTERS.select_progress(()) == "SELECT view_name FROM ks.speed_progress"
    assert POINTERS.select_progress() == "SELECT * FROM ks.speed_progress"
    assert (
        POINTERS.select_progress_of(("watermark",))
        == "SELECT view_name, watermark FROM ks.speed_progress WHERE view_name IN ?"
    )
    assert POINTERS.select_speed_versions.endswith("FROM ks.speed_versions WHERE view_name IN ?")
    with pytest.raises(ValueError, match=r"no columns \['lag'\]"):
        POINTERS.select_progress(("lag",))


class _Session:
    """The two calls these functions make on a driver session, answering from ``rows``."""

    def __init__(self, rows):
        self.rows, self.executed = rows, []

    def prepare(self, cql):
        return SimpleNamespace(query_string=cql, consistency_level=None)

    def execute(self, statement, params=()):
        self.executed.append((statement, params))
        return _Result(self.rows(statement, params))


class _Result(list):
    def one(self):
        return self[0] if self else None


def test_missing_columns_adds_what_an_older_progress_table_lacks():
    older = [SimpleNamespace(column_name=c) for c in ("view_name", "batch_id", "watermark")]
    session = _Session(lambda statement, params: older)
    alters = missing_columns(session, "ks")
    assert alters[0] == "ALTER TABLE ks.speed_progress ADD max_event_time timestamp"
    assert len(alters) == len(PROGRESS_COLUMNS) - 2
    assert "ALTER TABLE ks.speed_progress ADD rejected_rows map<text, bigint>" in alters
    assert session.executed[0][1] == ("ks", PROGRESS_TABLE)


def test_the_boundary_read_returns_one_type_in_utc():
    naive = datetime(2024, 5, 1, 10, 0)  # the driver returns naive UTC datetimes
    rows = {
        "page_activity": [
            SimpleNamespace(boundary=naive, version=7, run_id="r", published_at=naive)
        ],
        "clicks": [SimpleNamespace(boundary=None, version=None, run_id=None, published_at=None)],
        "search_terms": [],
    }
    session = _Session(lambda statement, params: rows[params[0]])
    cassandra = CassandraSettings(keyspace="ks")
    read = read_boundaries(cassandra, ["page_activity", "clicks", "search_terms"], session=session)
    at = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert read == {
        "page_activity": Boundary(at, 7, "r", at),
        "clicks": None,
        "search_terms": None,
    }
    assert session.executed[0][0].query_string == POINTERS.select_boundary
