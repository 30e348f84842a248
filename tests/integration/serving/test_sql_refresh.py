"""The SQL server's catalog refresh costs what changed, not the whole catalog again.

The refresh runs every ``sql.refresh_s`` (15 s by default) on the cores serving
answers from, so a refresh in which nothing changed must run no Spark job and make
no view again (a view's text names its sources, which Spark resolves at each query).
Here :class:`serving.connect.host.SqlServer` refreshes in this process, over the
published lake (its Cassandra keyspace included). That a new silver version is seen is
``test_tutorial``'s (the pipeline's events appear after its batch run).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.lake import GROUP
from tests.support.sql import sql_settings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group(GROUP),
]


class _Recording:
    """The session, with every statement the refresh gives it recorded."""

    def __init__(self, spark) -> None:
        self._spark, self.statements, self.views = spark, [], set()

    def sql(self, statement: str, *args, **kwargs):
        self.statements.append(statement)
        if made := re.match(r"CREATE OR REPLACE VIEW (\S+)", statement):
            self.views.add(made.group(1))
        return self._spark.sql(statement, *args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._spark, name)


def _jobs(spark, group: str) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_a_refresh_with_nothing_new_runs_no_spark_job_and_makes_no_view_again(
    published_lake, spark, tmp_path: Path
) -> None:
    from serving.connect.host import SqlServer

    settings = sql_settings(published_lake.settings, tmp_path / "state")
    recording = _Recording(spark)
    server = SqlServer(settings, recording)  # type: ignore[arg-type]
    try:
        server.refresh()
        made = [s for s in recording.statements if s.startswith("CREATE")]
        assert any("gold_page_activity" in s for s in made), made
        assert "web_events" in server.silver_versions  # its events were made

        recording.statements.clear()
        spark.sparkContext.setJobGroup("sql-refresh-unchanged", "a refresh, nothing new")
        try:
            server.refresh()
        finally:
            spark.sparkContext._jsc.clearJobGroup()
        assert _jobs(spark, "sql-refresh-unchanged") == 0
        made = [s.split(" AS", 1)[0] for s in recording.statements if s.startswith("CREATE")]
        assert made == ["CREATE OR REPLACE VIEW serving_boundaries"], made
    finally:
        server.close()
        for name in recording.views:  # the test session's catalog as it found it
            spark.sql(f"DROP VIEW IF EXISTS {name}")


def _engaged_sum_before_gold_has_it(spark, tmp_path: Path, monkeypatch) -> tuple[str, str]:
    """The next release of ``web_events`` adds a measure to ``page_activity`` that the lake's
    gold table does not have yet."""
    from dataclasses import replace

    from pipelines import PipelineSpec
    from views.spec import Measure

    declared = PipelineSpec.view_specs.fget

    def next_release(pipeline):  # a measure gold does not have yet
        return tuple(
            replace(spec, measures=(*spec.measures, Measure("engaged_sum", "sum", "Engaged.")))
            if spec.name == "page_activity"
            else spec
            for spec in declared(pipeline)
        )

    monkeypatch.setattr(PipelineSpec, "view_specs", property(next_release))
    return "page_activity", "engaged_sum"


def _gold_of_an_older_release(spark, tmp_path: Path, monkeypatch) -> tuple[str, str]:
    """``checkouts``' gold table was written by a release before ``order_value`` (the lake
    has no checkouts gold: this test's own stands in for it)."""
    from pyspark.sql.types import StructType

    from layout import lake
    from serving.sql import view_schema
    from views import view

    spec = view("orders_by_currency")
    older = StructType(view_schema(spec).fields[:-1])  # order_value, the last measure, left out
    path = str(tmp_path / "gold" / spec.name)
    spark.createDataFrame([], older).write.format("delta").save(path)
    declared = lake.gold_path

    def gold_path(settings, of):
        return path if of.name == spec.name else declared(settings, of)

    monkeypatch.setattr(lake, "gold_path", gold_path)
    return spec.name, "order_value"


BREAKS = {
    "web_events": _engaged_sum_before_gold_has_it,
    "checkouts": _gold_of_an_older_release,
}
"""Per pipeline, how one of its views comes to be one the refresh cannot make: returns the
view and the column the statement names that its gold table lacks."""


def _fingerprints(spark, flat: list[str], nested: list[str]) -> dict[str, tuple[int, Any]]:
    """Per view, (rows, an order-free checksum of them: of views with ``flat`` columns, else
    0), in one Spark job."""
    parts = [f"SELECT '{v}' AS v, xxhash64(*) AS h FROM {v}" for v in flat]
    parts += [f"SELECT '{v}' AS v, 0L AS h FROM {v}" for v in nested]
    union = "\nUNION ALL\n".join(parts)
    checksum = "sum(CAST(h AS DECIMAL(38, 0)))"  # a long's sum would overflow
    rows = spark.sql(f"SELECT v, count(*) AS n, {checksum} AS h FROM ({union}) GROUP BY v")
    found = {row.v: (row.n, row.h) for row in rows.collect()}
    return {v: found.get(v, (0, None)) for v in flat + nested}


def _analysts_see(spark, server) -> dict[str, dict[str, Any]]:
    """Per pipeline, what its analysts see in the catalog ``server`` made: each view's
    ``gold_``, ``speed_`` and ``serving_`` rows and ``serving_boundaries`` row, its events
    (rows), and what ``/health`` says is failing of it (None: a view it never made)."""
    from layout import read_boundaries
    from pipelines import PIPELINES, collector_pipeline
    from serving.timerange import to_ms

    made = set(server.views)
    _, health = server.catalog_state()
    rows = spark.sql("SELECT view_name, unix_millis(boundary) AS ms FROM serving_boundaries")
    shown = {row.view_name: row.ms for row in rows.collect()}
    published = read_boundaries(server.settings.cassandra, shown)
    assert shown == {v: b and to_ms(b.at) for v, b in published.items()}  # the ground truth
    views, events = {}, {}
    for pipeline in PIPELINES:
        views[pipeline.name] = [
            f"{layer}_{spec.name}"
            for spec in pipeline.view_specs
            for layer in ("gold", "speed", "serving")
        ]
        collected = pipeline.name == collector_pipeline().name
        events[pipeline.name] = (
            ["events", "events_all"] if collected else [f"{pipeline.name}_events"]
        )
    flat = [v for names in views.values() for v in names if v in made]
    rows_of = _fingerprints(
        spark, flat, [v for names in events.values() for v in names if v in made]
    )
    seen: dict[str, dict[str, Any]] = {}
    for pipeline in PIPELINES:
        parts: dict[str, Any] = {"failing": health["failing"].get(pipeline.name)}
        parts |= {name: rows_of.get(name) for name in views[pipeline.name] + events[pipeline.name]}
        parts |= {
            f"boundary of {spec.name}": shown.get(spec.name, "not shown")
            for spec in pipeline.view_specs
        }
        seen[pipeline.name] = parts
    return seen


@pytest.fixture(scope="module")
def healthy_catalog(published_lake, spark, tmp_path_factory) -> dict[str, dict[str, Any]]:
    """What analysts see of each pipeline in a catalog whose every view was made (its views
    dropped again: each test's server makes its own)."""
    from serving.connect.host import SqlServer

    settings = sql_settings(published_lake.settings, tmp_path_factory.mktemp("healthy") / "state")
    recording = _Recording(spark)
    server = SqlServer(settings, recording)  # type: ignore[arg-type]
    try:
        server.refresh()
        assert server.failures == {}, server.failures
        return _analysts_see(spark, server)
    finally:
        server.close()
        for name in recording.views:
            spark.sql(f"DROP VIEW IF EXISTS {name}")


@pytest.mark.parametrize("broken", sorted(BREAKS))
def test_a_view_that_cannot_be_made_leaves_every_other_view_current(
    broken, healthy_catalog, published_lake, spark, tmp_path: Path, monkeypatch
) -> None:
    """Finding 3 of the pipelines' isolation: every pipeline's views were made in one
    ``try``; a measure added to a view before its gold table had the column failed the
    refresh there, and no view after it was made (``checkouts``' ``orders_by_currency``
    loading first left no ``web_events`` view at all). Here one pipeline's view is broken
    in a new server's first refresh: the other pipeline's views, events, boundaries and
    health, and the broken pipeline's other views, are what a refresh with nothing broken
    made; the broken one is named in ``/health``."""
    from serving.connect.host import SqlServer

    view, column = BREAKS[broken](spark, tmp_path, monkeypatch)
    settings = sql_settings(published_lake.settings, tmp_path / "state")
    recording = _Recording(spark)
    server = SqlServer(settings, recording)  # type: ignore[arg-type]
    try:
        server.refresh()
        assert set(server.failures) == {broken}, server.failures
        assert set(server.failures[broken]) == {view}
        assert column in server.failures[broken][view]
        built, health = server.catalog_state()
        assert built and health["status"] == "degraded", health
        assert health["failing"] == server.failures
        seen = _analysts_see(spark, server)
        for pipeline, healthy in healthy_catalog.items():
            untouched = {
                part: value
                for part, value in healthy.items()
                if pipeline != broken or (view not in part and part != "failing")
            }
            assert {part: seen[pipeline][part] for part in untouched} == untouched, pipeline
        assert seen["web_events"]["serving_site_activity"][0] > 0  # they hold rows
        assert "web_events" in server.silver_versions
    finally:
        server.close()
        for name in recording.views:
            spark.sql(f"DROP VIEW IF EXISTS {name}")


def test_a_gold_table_first_written_by_another_process_is_served_at_the_next_refresh(
    published_lake, spark, tmp_path: Path
) -> None:
    """Finding 8: a new pipeline's ``gold_<view>`` answered no rows for minutes after its
    first publish. A refresh that found the table's log before its first commit had the
    JVM cache the log as "no table", and ``DeltaTable.isDeltaTable`` kept saying so after
    the batch layer (another process) committed. Here the table is copied in, as another
    process writes it."""
    import shutil

    from layout.lake import gold_path
    from serving.connect.host import SqlServer
    from views import view

    clicks = view("clicks")
    lake = tmp_path / "lake"
    settings = sql_settings(published_lake.settings, tmp_path / "state")
    settings = settings.model_copy(
        update={"lake": settings.lake.model_copy(update={"root": str(lake)})}
    )
    published = gold_path(published_lake.settings, clicks)
    rows = spark.read.format("delta").load(published).count()
    assert rows > 0
    target = Path(gold_path(settings, clicks))
    recording = _Recording(spark)
    server = SqlServer(settings, recording)  # type: ignore[arg-type]
    try:
        (target / "_delta_log").mkdir(parents=True)  # the first write has begun
        server.refresh()
        assert spark.sql("SELECT count(*) FROM gold_clicks").first()[0] == 0
        shutil.rmtree(target)
        shutil.copytree(published, target)  # ... and committed, in the batch layer
        server.refresh()
        assert spark.sql("SELECT count(*) FROM gold_clicks").first()[0] == rows
    finally:
        server.close()
        for name in recording.views:
            spark.sql(f"DROP VIEW IF EXISTS {name}")
