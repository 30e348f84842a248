"""Merged answers against the simulator's ground truth, before and after batch runs.

Simulated traffic from 23:52 to 00:02 (across midnight, so two day partitions)
goes through Kafka into the real speed layer; the batch rows are the same view
functions over the whole log (what gold holds), published with the batch
protocol at a boundary of 23:57, then at midnight. Every answer must equal the
truth whatever the boundary, the boundary must move, and distinct counts must
stay within the sketch's bound. The same rows are then queried with Spark SQL.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime

import pytest

from core.settings import KafkaSettings, LakeSettings, Settings, SpeedSettings
from ingest.simulator import SimulatorConfig, build_truth, generate, identity_of
from ingest.simulator.direct import produce_direct
from tests.support.web import WEB_EVENTS, WEB_VIEWS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

START, END = "2024-01-01T23:40:00Z", "2024-01-02T00:20:00Z"
FIRST = datetime(2024, 1, 1, 23, 57, tzinfo=UTC)
MIDNIGHT = datetime(2024, 1, 2, 0, 0, tzinfo=UTC)
SEEN: dict[str, dict] = {}
SPEED_TTL_S = 10 * 365 * 24 * 3600
"""The speed rows of 2024 are kept (and served as speed) for this module's questions."""


@pytest.fixture(scope="module")
def scenario(spark, serving_settings: Settings, tmp_path_factory):
    """Traffic in Kafka, the speed views in Cassandra, gold in Delta; batch rows to publish."""
    from confluent_kafka.admin import AdminClient
    from pyspark.sql import functions as F

    from batch_layer.gold import gold_path
    from core.event_time import EventTimeBounds
    from data_contracts import load_contract
    from ingest.topics import ensure_topics, platform_topics
    from pipelines import pipeline
    from speed_layer.job import start_queries
    from views.digest import pseudonymise
    from views.input import parse_records

    root = tmp_path_factory.mktemp("serving_truth")
    topic = serving_settings.cassandra.keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **serving_settings.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
        | {"suppressions_topic": f"{topic}.suppressions"}
    )
    settings = serving_settings.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "ck")),
            "speed": SpeedSettings(trigger="1 second", ttl_s=SPEED_TTL_S, pipelines=["web_events"]),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    events = generate(
        SimulatorConfig(
            seed=21,
            events=2400,
            rate=4.0,
            start=datetime(2024, 1, 1, 23, 52, tzinfo=UTC),
            duplicate_rate=0.05,
            out_of_order_rate=0.3,
            skewed_client_rate=0.2,
            invalid_rate=0.03,
        )
    )
    produce_direct(events, settings)
    for query in start_queries(spark, settings, WEB_EVENTS, available_now=True):
        query.awaitTermination(300)
        assert query.exception() is None, query.exception()

    raw = (
        spark.read.format("kafka")
        .options(**kafka.spark_options())
        .option("subscribe", kafka.events_topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    tolerance = EventTimeBounds.from_settings(settings).future_tolerance
    parsed, _ = parse_records(raw, load_contract("web_events", 1), tolerance)
    # Ids digested under the layers' key, as gold's input: the speed rows' sketches hold them.
    identity, key = pipeline("web_events").identity, settings.views.identity_key
    parsed = pseudonymise(parsed.dropDuplicates(["source_id", "event_id"]), identity, key).cache()
    batch_rows = {}
    for spec in WEB_VIEWS:
        rows = spec.build(parsed)
        rows.withColumn("window_date", F.to_date("window_start")).write.format("delta").mode(
            "overwrite"
        ).partitionBy("window_date").save(gold_path(settings, spec))
        batch_rows[spec.name] = [row.asDict() for row in rows.collect()]
    parsed.unpersist()
    yield settings, events, build_truth(events), batch_rows
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])


def _publish_all(publish, batch_rows, boundary) -> None:
    for view, rows in batch_rows.items():
        publish(view, rows, boundary)


def _events_per_minute(api) -> tuple[dict[str, int], dict]:
    answer = api.get(
        "/v1/timeseries", params={"view": "site_activity", "start": START, "end": END}
    ).json()
    buckets = answer["series"][0]["buckets"]
    return {b["start"]: b["events"] for b in buckets if b["events"]}, answer


def _page_views(api, paths) -> dict[str, dict[str, int]]:
    answer = api.get(
        "/v1/timeseries",
        params={
            "view": "page_activity",
            "key": paths,
            "start": START,
            "end": END,
            "measure": "page_views",
        },
    ).json()
    got: dict[str, dict[str, int]] = defaultdict(dict)
    for series in answer["series"]:
        for b in series["buckets"]:
            if b["page_views"]:
                got[b["start"]][series["key"]["path"]] = b["page_views"]
    return dict(got)


def _top(api, view, measure, n=10):
    answer = api.get(
        "/v1/top", params={"view": view, "measure": measure, "start": START, "end": END, "n": n}
    )
    assert answer.status_code == 200, answer.text
    return {next(iter(i["key"].values())): i["value"] for i in answer.json()["items"]}


def _truth_totals(per_minute: dict[str, dict[str, int]]) -> Counter:
    totals: Counter = Counter()
    for keys in per_minute.values():
        totals.update(keys)
    return totals


def _check_all(api, truth) -> None:
    per_minute, _ = _events_per_minute(api)
    assert per_minute == truth.events_per_minute
    pages = _truth_totals(truth.page_views)
    popular = [p for p, _ in pages.most_common(5)]
    expected = {
        m: {p: n for p, n in by_page.items() if p in popular}
        for m, by_page in truth.page_views.items()
    }
    assert _page_views(api, popular) == {m: v for m, v in expected.items() if v}
    top = _top(api, "page_activity", "page_views")
    assert all(pages[p] == v for p, v in top.items())
    assert sorted(top.values(), reverse=True) == [n for _, n in pages.most_common(len(top))]
    terms = _truth_totals(truth.searches)
    top_terms = _top(api, "search_terms", "searches", n=5)
    assert all(terms[t] == v for t, v in top_terms.items())
    assert sorted(top_terms.values(), reverse=True) == [n for _, n in terms.most_common(5)]
    assert sum(_top(api, "clicks", "clicks", n=100).values()) == sum(
        _truth_totals(truth.clicks).values()
    )


def test_before_any_batch_run_the_speed_views_answer_exactly(scenario, api) -> None:
    _, _, truth, _ = scenario
    _check_all(api, truth)
    _, answer = _events_per_minute(api)
    assert answer["boundary"] == {"site_activity": None}
    SEEN["before"] = answer


def test_a_batch_run_moves_the_boundary_and_the_counts_stay(scenario, api, publish) -> None:
    _, _, truth, batch_rows = scenario
    _publish_all(publish, batch_rows, FIRST)
    _check_all(api, truth)
    per_minute, answer = _events_per_minute(api)
    assert answer["boundary"] == {"site_activity": "2024-01-01T23:57:00Z"}
    final = {b["start"] for b in answer["series"][0]["buckets"] if b["final"]}
    assert max(final) == "2024-01-01T23:56:00Z"
    before = {b["start"]: b["events"] for b in SEEN["before"]["series"][0]["buckets"]}
    assert {m: n for m, n in before.items() if n} == per_minute

    _publish_all(publish, batch_rows, MIDNIGHT)  # the next run: a new version, later boundary
    _check_all(api, truth)
    _, answer = _events_per_minute(api)
    assert answer["boundary"] == {"site_activity": "2024-01-02T00:00:00Z"}
    assert sum(b["events"] for b in answer["series"][0]["buckets"] if b["final"]) == sum(
        n for m, n in truth.events_per_minute.items() if m < "2024-01-02T00:00:00Z"
    )


def test_distinct_counts_stay_within_the_sketch_bound(scenario, api) -> None:
    _, events, truth, _ = scenario
    site = api.get("/v1/reach", params={"start": START, "end": END}).json()
    assert abs(site["visitors"] - truth.visitors_total) <= 0.05 * truth.visitors_total
    assert site["lower_bound"] <= truth.visitors_total <= site["upper_bound"] + 1
    seen, visitors = set(), defaultdict(set)
    for event in events:
        key = event.message_id
        if key in seen or event.defect is not None:
            continue
        seen.add(key)
        if event.payload.get("type") == "page":
            visitors[event.payload["properties"]["path"]].add(identity_of(event.payload))
    page, ids = max(visitors.items(), key=lambda item: len(item[1]))
    answer = api.get(
        "/v1/reach", params={"view": "page_activity", "key": page, "start": START, "end": END}
    ).json()
    assert abs(answer["visitors"] - len(ids)) <= max(2, 0.05 * len(ids))
    assert answer["source"] == "mixed"


def test_the_demo_report_shows_boundary_and_totals(scenario) -> None:
    from serving.report import demo_answers, merged_counts

    settings, _, truth, _ = scenario
    start, end = datetime(2024, 1, 1, 23, 40, tzinfo=UTC), datetime(2024, 1, 2, 0, 20, tzinfo=UTC)
    text = demo_answers(settings, start, end)
    assert "boundary 2024-01-02T00:00:00Z" in text
    assert f"total {truth.valid_events} events" in text
    assert "top pages" in text and "slowest pages" in text and "top search terms" in text
    assert merged_counts(settings, start, end) == truth.events_per_minute


def test_spark_sql_sees_the_same_merged_views(scenario, spark) -> None:
    from serving.sql import register_views

    settings, _, truth, _ = scenario
    boundaries = register_views(
        spark,
        settings,
        speed_start=datetime(2024, 1, 1, 23, 0, tzinfo=UTC),
        speed_end=datetime(2024, 1, 2, 1, 0, tzinfo=UTC),
        views=WEB_VIEWS,  # the scenario's pipeline
    )
    assert boundaries["site_activity"] == MIDNIGHT
    row = spark.sql(
        "SELECT sum(events) AS events, hll_sketch_estimate(hll_union_agg(visitors)) AS visitors, "
        "sum(CASE WHEN final THEN events END) AS final FROM serving_site_activity"
    ).first()
    assert row.events == truth.valid_events
    assert abs(row.visitors - truth.visitors_total) <= 0.05 * truth.visitors_total
    assert row.final == sum(n for m, n in truth.events_per_minute.items() if m < "2024-01-02")
    top = spark.sql(
        "SELECT path, sum(page_views) AS views FROM serving_page_activity "
        "GROUP BY path ORDER BY views DESC, path LIMIT 3"
    ).collect()
    pages = _truth_totals(truth.page_views)
    assert [r.views for r in top] == [n for _, n in pages.most_common(3)]
    assert spark.sql("SELECT count(*) FROM serving_boundaries").first()[0] == 4
    # gold_ and speed_ views are there for analysts too; the merge takes each window once.
    both = spark.sql(
        "SELECT count(*) FROM gold_site_activity g JOIN speed_site_activity s USING (window_start)"
    ).first()[0]
    assert both == len(truth.events_per_minute)
