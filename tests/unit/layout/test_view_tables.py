"""One class for a view's tables in either layer: DDL, inserts, bound values and reads agree."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from infra.terraform.cql import parse_create_table
from layout import LAYERS, ViewTables, create_statements, view_tables
from tests.support.web import WEB_VIEWS
from views import Measure, ViewSpec, view
from views.kinds import KINDS, kind

EVERY_KIND = ViewSpec(
    "every_kind",
    ("site", "path"),
    tuple(Measure(f"m_{name}", name) for name in KINDS),
    id,
    "One measure of every kind.",
)


def _columns(statement: str) -> list[str]:
    match = re.fullmatch(r"INSERT INTO \S+ \(([^)]*)\) VALUES \(([^)]*)\)", statement)
    assert match, statement
    columns, marks = match.group(1).split(", "), match.group(2).split(", ")
    assert len(marks) == len(columns), statement
    return columns


@pytest.mark.parametrize("spec", (*WEB_VIEWS, EVERY_KIND), ids=lambda v: v.name)
def test_speed_and_batch_tables_type_every_measure_alike(spec: ViewSpec):
    speed = parse_create_table(ViewTables(spec, "ks", "speed").create(60)[0])
    batch = parse_create_table(ViewTables(spec, "ks", "batch").create()[0])
    for measure in spec.measures:
        expected = kind(measure.kind).cql_type
        assert dict(speed.columns)[measure.name] == dict(batch.columns)[measure.name] == expected


@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_speed_tables_expire_and_carry_the_micro_batch_that_wrote_them(spec: ViewSpec):
    by_key, by_minute = (parse_create_table(s) for s in ViewTables(spec, "ks", "speed").create(90))
    assert by_key.name == f"speed_{spec.name}"
    assert by_key.partition_key == (*spec.keys, "day")
    assert by_key.clustering_key == (("window_start", "DESC"),)
    assert by_minute.name == f"speed_{spec.name}_by_minute"
    assert by_minute.partition_key == ("window_start",)
    assert by_minute.clustering_key == tuple((k, "ASC") for k in spec.keys)
    for table in (by_key, by_minute):
        assert table.default_time_to_live == 90
        assert dict(table.columns)["batch_id"] == "bigint"
        assert dict(table.columns)["written_at"] == "timestamp"
        assert dict(table.columns)["run_id"] == "uuid"
        assert "version" not in dict(table.columns)
    assert "TimeWindowCompactionStrategy" in ViewTables(spec, "ks", "speed").create(90)[1]


def test_a_versioned_speed_output_is_a_parameter_not_a_copy():
    spec = view("page_activity")
    versioned = ViewTables(spec, "ks", "speed", versioned=True)
    by_key, by_minute = (parse_create_table(s) for s in versioned.create(60))
    assert by_key.partition_key == ("path", "day", "version")
    assert by_minute.partition_key == ("window_start", "version")
    assert by_key.default_time_to_live == 60
    assert "version = ?" in versioned.select_range(["page_views"])
    assert versioned.select_minute(["page_views"]).endswith("window_start = ? AND version = ?")
    with pytest.raises(ValueError, match="needs a version"):
        versioned.bind(datetime(2024, 1, 1, tzinfo=UTC), ["/"], [1] * 6, written_by=(1, None, 0))
    assert ViewTables(spec, "ks", "speed").versioned is False
    assert ViewTables(spec, "ks", "batch").versioned is True


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("spec", (*WEB_VIEWS, EVERY_KIND), ids=lambda v: v.name)
def test_bound_values_land_in_their_columns(spec: ViewSpec, layer: str):
    tables = ViewTables(spec, "ks", layer)
    start = datetime(2024, 5, 1, 10, 7, tzinfo=UTC)
    keys = [f"key-{k}" for k in spec.keys]
    measures = [f"value-{m.name}" for m in spec.measures]
    extra = {"version": 42} if tables.versioned else {}
    run = "00000000-0000-0000-0000-000000000007"
    written_by = (
        {"batch_id": 7, "written_at": start, "checkpoint_id": 2, "run_id": run}
        if layer == "speed"
        else {}
    )
    by_key, by_minute = tables.bind(
        start, keys, measures, written_by=tuple(written_by.values()), **extra
    )
    expected = {
        **dict(zip(spec.keys, keys, strict=True)),
        **{m.name: v for m, v in zip(spec.measures, measures, strict=True)},
        "window_start": start,
        **extra,
        **written_by,
    }
    assert dict(zip(_columns(tables.insert_by_key()), by_key, strict=True)) == {
        **expected,
        "day": start.date(),
    }
    assert dict(zip(_columns(tables.insert_by_minute()), by_minute, strict=True)) == expected


def test_rows_of_the_wrong_shape_are_refused():
    start = datetime(2024, 5, 1, tzinfo=UTC)
    clicks = view("clicks")
    with pytest.raises(ValueError, match="has no version"):
        ViewTables(clicks, "ks", "speed").bind(
            start, ["a"], [1], version=3, written_by=(1, start, 0)
        )
    with pytest.raises(
        ValueError, match=r"written with \['batch_id', 'written_at', 'checkpoint_id', 'run_id'\]"
    ):
        ViewTables(clicks, "ks", "speed").bind(start, ["a"], [1])
    # A row loaded as it is (a fixture, a benchmark) carries no run.
    _, by_minute = ViewTables(clicks, "ks", "speed").bind(
        start, ["a"], [1], written_by=(1, start, 0)
    )
    assert by_minute[-4:] == (1, start, 0, None)
    with pytest.raises(ValueError, match="Unknown layer 'kappa'"):
        ViewTables(clicks, "ks", "kappa")
    with pytest.raises(ValueError, match="need a ttl_s"):
        ViewTables(clicks, "ks", "speed").create()
    with pytest.raises(ValueError, match="never expire"):
        ViewTables(clicks, "ks", "batch").create(60)


def test_the_reads_serving_prepares():
    page = view("page_activity")
    speed, batch = ViewTables(page, "ks", "speed"), ViewTables(page, "ks", "batch")
    assert speed.select_range(["page_views", "visitors"]) == (
        "SELECT toUnixTimestamp(window_start), page_views, visitors FROM ks.speed_page_activity "
        "WHERE path = ? AND day = ? AND window_start >= ? AND window_start < ?"
    )
    assert batch.select_range(["load_sketch"]) == (
        "SELECT toUnixTimestamp(window_start), load_sketch FROM ks.batch_page_activity "
        "WHERE path = ? AND day = ? AND version = ? AND window_start >= ? AND window_start < ?"
    )
    assert batch.select_minute(()) == (
        "SELECT path FROM ks.batch_page_activity_by_minute WHERE window_start = ? AND version = ?"
    )
    assert batch.delete_minute() == (
        "DELETE FROM ks.batch_page_activity_by_minute WHERE window_start = ? AND version = ?"
    )
    assert batch.delete_day() == (
        "DELETE FROM ks.batch_page_activity WHERE path = ? AND day = ? AND version = ?"
    )
    with pytest.raises(ValueError, match=r"no measures \['views'\]; it has: page_views"):
        speed.select_minute(["views"])
    with pytest.raises(ValueError, match="at least one measure"):
        speed.select_range([])


def test_a_view_a_pipeline_declares_gets_its_tables(monkeypatch):
    import pipelines

    declared = pipelines.declared_views()
    monkeypatch.setattr(pipelines, "declared_views", lambda: (*declared, EVERY_KIND))
    names = {parse_create_table(s).name for s in create_statements("ks", 60)}
    assert {
        "speed_every_kind",
        "speed_every_kind_by_minute",
        "batch_every_kind",
        "batch_every_kind_by_minute",
    } <= names
    assert [t.spec.name for t in view_tables("ks", "speed")][-1] == "every_kind"


def test_the_stored_rows_of_a_window_are_one_partition_read():
    tables = ViewTables(view("clicks"), "ks", "speed")
    assert tables.select_stored_window() == (
        "SELECT target, clicks, batch_id, written_at, checkpoint_id, run_id FROM "
        "ks.speed_clicks_by_minute WHERE window_start = ?"
    )
    versioned = ViewTables(view("clicks"), "ks", "speed", versioned=True)
    assert versioned.select_stored_window().endswith("WHERE window_start = ? AND version = ?")
    assert ViewTables(view("clicks"), "ks", "speed").added_columns()["ks.speed_clicks"] == {
        "clicks": "bigint",
        "batch_id": "bigint",
        "written_at": "timestamp",
        "checkpoint_id": "int",
        "run_id": "uuid",
    }


def test_a_new_ttl_reaches_both_speed_tables_of_a_version():
    v2 = ViewTables(view("clicks"), "ks", "speed", table_version=2)
    assert v2.alter_ttl(7200) == [
        "ALTER TABLE ks.speed_v2_clicks WITH default_time_to_live = 7200",
        "ALTER TABLE ks.speed_v2_clicks_by_minute WITH default_time_to_live = 7200",
    ]
    with pytest.raises(ValueError, match="never expire"):
        ViewTables(view("clicks"), "ks", "batch").alter_ttl(7200)


def test_a_replay_writes_its_version_into_tables_of_their_own():
    v3 = ViewTables(view("clicks"), "ks", "speed", table_version=3)
    assert (v3.by_key, v3.by_minute) == ("ks.speed_v3_clicks", "ks.speed_v3_clicks_by_minute")
    assert v3.insert_by_minute().startswith("INSERT INTO ks.speed_v3_clicks_by_minute (")
    assert v3.drop() == [
        "DROP TABLE IF EXISTS ks.speed_v3_clicks",
        "DROP TABLE IF EXISTS ks.speed_v3_clicks_by_minute",
    ]
    assert ViewTables(view("clicks"), "ks", "speed", table_version=0).by_key == "ks.speed_clicks"
    with pytest.raises(ValueError, match="0 or more"):
        ViewTables(view("clicks"), "ks", "speed", table_version=-1)
