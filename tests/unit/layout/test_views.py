"""The Cassandra view tables: one pair per view and layer, typed and keyed as documented."""

from __future__ import annotations

import re

import pytest

from infra.terraform.cql import KeyspacesTable, parse_create_table
from layout import (
    BOUNDARY_TABLE,
    DAYS_TABLE,
    SUPERSEDED_TABLE,
    ViewTables,
    create_statements,
    view_tables,
)
from pipelines import PIPELINES, declared_views
from tests.support.web import WEB_VIEWS
from views import Measure, ViewSpec, view

# What each measure kind is once in Cassandra: a count is a long, a sum or a max a
# double, a sketch its serialized bytes (views.spec.MeasureKind).
CQL_TYPE = {"count": "bigint", "sum": "double", "max": "double", "hll": "blob", "kll": "blob"}


@pytest.fixture(scope="module")
def tables() -> dict[str, KeyspacesTable]:
    statements = [s for s in create_statements("ks", 3600) if " ks.batch_" in s]
    parsed = {parse_create_table(s).name: parse_create_table(s) for s in statements}
    assert len(parsed) == len(statements), "two statements create the same table"
    return parsed


def test_every_statement_is_idempotent_and_in_the_keyspace():
    for statement in create_statements("analytics", 3600):
        assert statement.startswith("CREATE TABLE IF NOT EXISTS analytics.")


def test_two_tables_per_view_and_grain_and_the_three_pointer_tables(tables):
    suffixes = ("", "_by_minute", "_hours", "_by_hour", "_days", "_by_day")
    every = {v.name for v in WEB_VIEWS} | {v.name for v in declared_views()}
    expected = {f"batch_{v}{suffix}" for v in every for suffix in suffixes}
    assert set(tables) == expected | {"batch_days", "batch_boundary", "batch_superseded"}
    assert (DAYS_TABLE, BOUNDARY_TABLE, SUPERSEDED_TABLE) == (
        "batch_days",
        "batch_boundary",
        "batch_superseded",
    )


def test_every_view_of_every_pipeline_has_its_tables(tables):
    for spec in PIPELINES:
        for v in spec.view_specs:
            assert f"batch_{v.name}" in tables and f"batch_{v.name}_by_minute" in tables


def test_a_view_outside_the_registry_gets_its_tables_when_listed():
    # Views of a pipeline not declared here get their tables when listed.
    orders = ViewSpec("orders_per_minute", ("currency",), (Measure("orders", "count"),), id, "")
    names = {
        parse_create_table(s).name for s in create_statements("ks", 3600, (*WEB_VIEWS, orders))
    }
    assert {"batch_orders_per_minute", "batch_orders_per_minute_by_minute"} <= names
    assert "batch_clicks" in names
    assert {"batch_orders_per_minute_hours", "batch_orders_per_minute_by_day"} <= names


def test_a_rollup_has_the_minute_tables_partitioning_under_its_own_names():
    minute = ViewTables(view("clicks"), "ks", "batch")
    hour = ViewTables(view("clicks"), "ks", "batch", grain="hour")
    assert (hour.by_key, hour.by_minute) == ("ks.batch_clicks_hours", "ks.batch_clicks_by_hour")
    assert hour.create()[0] == minute.create()[0].replace("batch_clicks ", "batch_clicks_hours ")
    assert hour.select_minute(["clicks"]) == (
        "SELECT target, clicks FROM ks.batch_clicks_by_hour WHERE window_start = ? AND version = ?"
    )
    with pytest.raises(ValueError, match="grain must be one of minute, hour, day"):
        ViewTables(view("clicks"), "ks", "batch", grain="week")


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_by_key_table_one_partition_per_keys_day_and_version(tables, spec: ViewSpec):
    table = tables[f"batch_{spec.name}"]
    assert table.partition_key == (*spec.keys, "day", "version")
    assert table.clustering_key == (("window_start", "DESC"),)
    columns = dict(table.columns)
    assert [name for name, _ in table.columns] == [
        *spec.keys,
        "day",
        "version",
        "window_start",
        *(m.name for m in spec.measures),
    ]
    assert {k: columns[k] for k in spec.keys} == dict.fromkeys(spec.keys, "text")
    assert (columns["day"], columns["version"], columns["window_start"]) == (
        "date",
        "bigint",
        "timestamp",
    )
    for measure in spec.measures:
        assert columns[measure.name] == CQL_TYPE[measure.kind], measure


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_by_minute_table_one_partition_per_minute_and_version(tables, spec: ViewSpec):
    table = tables[f"batch_{spec.name}_by_minute"]
    assert table.partition_key == ("window_start", "version")
    assert table.clustering_key == tuple((k, "ASC") for k in spec.keys)
    by_key = dict(tables[f"batch_{spec.name}"].columns)
    by_minute = dict(table.columns)
    assert set(by_minute) == set(by_key) - {"day"}
    assert {name: by_key[name] for name in by_minute} == by_minute


def test_page_activity_types_spelled_out(tables):
    columns = dict(tables["batch_page_activity"].columns)
    assert columns == {
        "path": "text",
        "day": "date",
        "version": "bigint",
        "window_start": "timestamp",
        "page_views": "bigint",
        "visitors": "blob",
        "load_count": "bigint",
        "load_sum": "double",
        "load_max": "double",
        "load_sketch": "blob",
    }


def test_batch_and_speed_tables_type_every_measure_alike(tables):
    # Serving merges batch rows before the boundary with speed rows after it.
    for speed in view_tables("ks", "speed"):
        speed_columns = dict(parse_create_table(speed.create(60)[0]).columns)
        batch_columns = dict(tables[f"batch_{speed.spec.name}"].columns)
        for measure in speed.spec.measures:
            assert batch_columns[measure.name] == speed_columns[measure.name], measure


def test_pointer_tables(tables):
    days = tables["batch_days"]
    assert days.partition_key == ("view_name",)
    assert days.clustering_key == (("day", "DESC"),)
    assert dict(days.columns) == {
        "view_name": "text",
        "day": "date",
        "version": "bigint",
        "rows": "bigint",
        "published_at": "timestamp",
        "rollups": "boolean",
    }
    boundary = tables["batch_boundary"]
    assert boundary.partition_key == ("view_name",) and boundary.clustering_key == ()
    assert dict(boundary.columns)["boundary"] == "timestamp"
    superseded = tables["batch_superseded"]
    assert superseded.partition_key == ("view_name",)
    assert superseded.clustering_key == (("day", "ASC"), ("version", "ASC"))
    assert dict(superseded.columns)["superseded_at"] == "timestamp"


def _insert_columns(statement: str) -> tuple[str, list[str], int]:
    match = re.fullmatch(r"INSERT INTO (\S+) \(([^)]*)\) VALUES \(([^)]*)\)", statement)
    assert match, statement
    table, columns, marks = match.groups()
    return table, columns.split(", "), len(marks.split(", "))


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_inserts_write_every_column_of_their_table_once(tables, spec: ViewSpec):
    pair = ViewTables(spec, "ks", "batch")
    for statement, name in (
        (pair.insert_by_key(), f"batch_{spec.name}"),
        (pair.insert_by_minute(), f"batch_{spec.name}_by_minute"),
    ):
        table, columns, marks = _insert_columns(statement)
        assert table == f"ks.{name}"
        assert columns == [c for c, _ in tables[name].columns]
        assert marks == len(columns)


def test_insert_order_is_the_one_publish_writes_rows_in():
    # ViewTables.bind gives publish (*keys, day, version, start, *measures) and
    # (start, version, *keys, *measures).
    pair = ViewTables(view("clicks"), "ks", "batch")
    assert pair.insert_by_key() == (
        "INSERT INTO ks.batch_clicks (target, day, version, window_start, clicks) "
        "VALUES (?, ?, ?, ?, ?)"
    )
    assert pair.insert_by_minute() == (
        "INSERT INTO ks.batch_clicks_by_minute (window_start, version, target, clicks) "
        "VALUES (?, ?, ?, ?)"
    )


def test_batch_tables_follow_the_declarations_in_order():
    from pipelines import declared_views

    every = declared_views()
    assert [t.spec.name for t in view_tables("ks", "batch")] == [v.name for v in every]
    assert view_tables("ks", "batch")[0].by_minute == f"ks.batch_{every[0].name}_by_minute"
