"""Run inside a copy of the project holding the tutorial's files: the tutorial's pipeline,
end to end, in one process. Prints one JSON object of what each step answered.

``python tutorial_driver.py EVENTS.json FORGET_MEMBER`` with ``WAP_*`` naming this run's
topic, keyspace, lake and state; ``EVENTS.json`` lists ``[event_id, kind, list, member,
iso time]``, each produced once through the tutorial's ``newsletter_service`` module.
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path


def main(events_file: str, forget: str) -> dict:
    import newsletter_service
    from confluent_kafka.admin import AdminClient

    import pipelines
    from batch_layer.gold import gold_path
    from batch_layer.runner import run_steps
    from batch_layer.silver import silver_path
    from batch_layer.steps import DERIVED, FORGET, THROUGH_PUBLISH
    from core.settings import load_settings
    from core.spark import build_spark_session
    from ingest.topics import ensure_topics, pipeline_topics, platform_topics
    from layout import create_tables
    from layout.lake import derived_path
    from platformctl.forget import reached_by
    from serving.connect.host import SqlServer
    from serving.report import merged_counts
    from speed_layer.cli import drain

    here = Path.cwd().resolve()
    assert Path(pipelines.__file__).resolve().is_relative_to(here), pipelines.__file__
    settings = load_settings()
    spec = pipelines.validate_all() and pipelines.pipeline("signups")
    (view,) = spec.view_specs
    topics = [*platform_topics(settings.kafka), *pipeline_topics(settings.kafka, [spec])]
    ensure_topics(AdminClient(settings.kafka.client_config()), topics)
    create_tables(settings, pipelines.declared_views())

    events = json.loads(Path(events_file).read_text())
    for event_id, kind, list_name, member, at in events:
        newsletter_service.record(event_id, kind, list_name, member, datetime.fromisoformat(at))
    newsletter_service.flush()
    start = min(datetime.fromisoformat(e[4]) for e in events) - timedelta(minutes=1)
    end = datetime.now(UTC) + timedelta(minutes=1)
    lists = sorted({e[2] for e in events})

    def merged() -> dict:
        return {
            name: merged_counts(settings, start, end, view.name, "signups", (name,))
            for name in lists
        }

    spark = build_spark_session(settings, app_name="tutorial")
    out: dict = {"pipelines": [p.name for p in pipelines.PIPELINES]}
    out["drained"] = drain(spark, settings)
    out["live"] = merged()

    summary, out["batch_exit"] = run_steps(spark, settings, THROUGH_PUBLISH, spec, "tutorial-1")
    out["published_days"] = summary["steps"]["publish"]["result"]
    out["merged"] = merged()
    gold = spark.read.format("delta").load(gold_path(settings, view))
    out["gold_signups"] = gold.groupBy().sum("signups").first()[0]

    # The pipeline over it: built from the silver the gate just passed.
    members = pipelines.derived_pipeline("list_members")
    _, out["derived_exit"] = run_steps(spark, settings, DERIVED, members, "tutorial-1-members")

    def member_rows() -> dict:
        table = spark.read.format("delta").load(derived_path(settings, members.name))
        return {f"{r[0]}/{r[1]}": [r[2], r[3]] for r in table.collect()}

    out["derived_rows"] = member_rows()

    server = SqlServer(settings, spark)
    try:
        server.refresh()
    finally:
        server.close()
    rows = spark.sql("SELECT * FROM signups_events")
    out["sql_columns"] = rows.columns
    out["sql_events"] = rows.count()
    derived = spark.sql("SELECT * FROM list_members")
    out["sql_derived_columns"] = derived.columns
    out["sql_derived_subscribed"] = derived.groupBy().sum("subscribed").first()[0]
    out["sql_merged"] = {
        r["list"]: r["signups"]
        for r in spark.sql(
            "SELECT list, sum(signups) AS signups FROM serving_signups_by_list GROUP BY list"
        ).collect()
    }

    _, out["forget_exit"] = run_steps(spark, settings, FORGET, spec, "tutorial-forget", user=forget)
    for reader in reached_by({spec.name}):  # as platformctl forget does, after the input
        run_steps(spark, settings, DERIVED, reader, f"tutorial-forget-{reader.name}")
    out["derived_rows_after_forget"] = member_rows()
    silver = spark.read.format("delta").load(silver_path(settings, spec))
    out["silver_rows_of_forgotten"] = silver.where(silver.member_id == forget).count()
    out["silver_rows"] = silver.count()
    gold = spark.read.format("delta").load(gold_path(settings, view))
    out["gold_signups_after_forget"] = gold.groupBy().sum("signups").first()[0]
    spark.stop()
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path.cwd()))
    print(json.dumps(main(sys.argv[1], sys.argv[2]), default=str), flush=True)
