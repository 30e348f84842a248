"""The SQL server and ``POST /v1/sql`` against simulated traffic and its ground truth.

Two days of simulated traffic (and seven events of a crawler) go through
Kafka and the real batch pipeline (bronze -> silver -> gold -> publish) into
this module's lake and keyspace; the SQL server (``python -m serving.connect``)
runs as its own process on them. An analyst's script, in a virtualenv holding
only ``pyspark-client`` from PyPI, connects over Spark Connect, lists the
views and runs the example queries of ``docs/sql.md``; their answers must
equal the truth computed here from the sent events. The HTTP endpoint answers
the same queries and refuses what it must.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from core.settings import (
    BatchSettings,
    KafkaSettings,
    LakeSettings,
    Settings,
    SqlSettings,
    settings_env,
)
from ingest.simulator import SimulatorConfig, build_truth, generate
from ingest.simulator.direct import produce_direct
from serving.connect.examples import doc_queries

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
PARAMS = {"start": "2024-03-01T00:00:00Z", "end": "2024-03-10T00:00:00Z"}
SQL_TOKEN = "sql-test-token"
BOT_UA = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
SPEED_TTL_S = 10 * 365 * 24 * 3600


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def serving_settings(serving_settings: Settings, tmp_path_factory) -> Settings:
    """The serving tests' keyspace, plus this module's topic, lake, state and SQL server."""
    from confluent_kafka.admin import AdminClient

    from core.spark import local_spark_jars
    from ingest.topics import ensure_topics, platform_topics

    root = tmp_path_factory.mktemp("sql")
    topic = serving_settings.cassandra.keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **serving_settings.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq"}
        | {"suppressions_topic": f"{topic}.suppressions", "partitions": 2}
    )
    ensure_topics(AdminClient(kafka.client_config()), platform_topics(kafka))
    jars = local_spark_jars(serving_settings.local.state_dir)
    return serving_settings.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "cp")),
            "batch": BatchSettings(reports_dir=root / "quality", lateness_s=60),
            "local": serving_settings.local.model_copy(update={"state_dir": root / "state"}),
            "spark": serving_settings.spark.model_copy(update={"jars": jars}),
            "sql": SqlSettings(
                port=_free_port(),
                health_port=_free_port(),
                token=SQL_TOKEN,
                refresh_s=5,
                time_limit_s=30,
                max_rows=500,
            ),
        }
    )


def _bot_copies(events, count: int = 7):
    """``count`` crawler visits: copies of page views with a campaign, under new ids."""
    pages = [
        e
        for e in events
        if e.defect is None
        and not e.duplicate
        and e.payload.get("type") == "page"
        and e.payload.get("context", {}).get("campaign")
    ]
    bots = []
    for i, event in enumerate(pages[:count]):
        payload = copy.deepcopy(event.payload)
        payload["messageId"] = str(uuid.uuid4())
        payload["anonymousId"] = f"crawler-{i}"
        payload.pop("userId", None)
        payload["context"]["userAgent"] = BOT_UA
        bots.append(replace(event, payload=payload, seq=10_000_000 + i))
    assert len(bots) == count
    return bots


@pytest.fixture(scope="module")
def traffic(spark, serving_settings: Settings):
    """Simulated traffic through Kafka and the batch pipeline; (events sent, valid ones)."""
    from batch_layer.__main__ import PIPELINE_STEPS, run_step
    from batch_layer.pipelines import WEB_EVENTS

    events = generate(
        SimulatorConfig(
            seed=31,
            events=3000,
            rate=0.03,  # two days: cohorts for the retention query
            start=datetime(2024, 3, 4, 6, 0, tzinfo=UTC),
            duplicate_rate=0.03,
            invalid_rate=0.02,
        )
    )
    events += _bot_copies(events)
    produce_direct(events, serving_settings)
    for step in PIPELINE_STEPS:
        run_step(spark, serving_settings, step, WEB_EVENTS, "sql-test-1", None)
    seen, valid = set(), []
    for event in events:
        if event.defect is None and event.message_id not in seen:
            seen.add(event.message_id)
            valid.append(event)
    yield events, valid
    from confluent_kafka.admin import AdminClient

    kafka = serving_settings.kafka
    AdminClient(kafka.client_config()).delete_topics(
        [kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic]
    )


@pytest.fixture(scope="module")
def sql_server(serving_settings: Settings, traffic):
    """``python -m serving.connect`` on this module's settings, its catalog built."""
    state = serving_settings.local.state_dir
    state.mkdir(parents=True, exist_ok=True)
    log = open(state / "sql.log", "w")  # noqa: SIM115 - closed below
    env = {**os.environ, **settings_env(serving_settings)}
    process = subprocess.Popen(
        [sys.executable, "-m", "serving.connect"], cwd=ROOT, env=env, stdout=log, stderr=log
    )
    health = f"http://127.0.0.1:{serving_settings.sql.health_port}/health"
    deadline = time.monotonic() + 300
    while True:
        assert process.poll() is None, (state / "sql.log").read_text()[-5000:]
        assert time.monotonic() < deadline, (state / "sql.log").read_text()[-5000:]
        try:
            body = httpx.get(health, timeout=5).json()
            if body.get("silver_version") is not None and body["status"] == "ok":
                break
        except httpx.HTTPError:
            pass
        time.sleep(1)
    yield body
    process.terminate()
    process.wait(60)
    log.close()


@pytest.fixture(scope="module")
def client_python(tmp_path_factory) -> Path:
    """A virtualenv with nothing but ``pyspark-client`` (from PyPI) and its dependencies."""
    venv = tmp_path_factory.mktemp("analyst") / "venv"
    uv = Path(sys.executable).with_name("uv")
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, venv], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [uv, "pip", "install", "-q", "--python", python, "pyspark-client==4.1.3"], check=True
    )
    return python


# --- the ground truth of the docs' queries -------------------------------------------------


def _human(event) -> bool:
    return event.payload["context"].get("userAgent") != BOT_UA


def _top_pages(events) -> list[list]:
    views = Counter()
    for minute in build_truth(events).page_views.values():
        views.update(minute)
    ranked = sorted(views.items(), key=lambda item: (-item[1], item[0]))[:10]
    return [[path, count] for path, count in ranked]


def _visitors_by_campaign(valid) -> list[list]:
    visitors, counts = defaultdict(set), Counter()
    for e in filter(_human, valid):
        campaign = e.payload["context"].get("campaign")
        if campaign:
            key = (campaign["name"], campaign["source"], campaign["medium"])
            visitors[key].add(e.payload["anonymousId"])
            counts[key] += 1
    rows = [[*key, len(visitors[key]), counts[key]] for key in visitors]
    return sorted(rows, key=lambda row: (-row[3], row[0]))


def _funnel(valid) -> list[list]:
    humans = list(filter(_human, valid))
    viewed = {}
    for e in humans:
        if e.payload["type"] == "page":
            who = e.payload["anonymousId"]
            viewed[who] = min(viewed.get(who, e.time), e.time)
    searched = {
        e.payload["anonymousId"]
        for e in humans
        if e.payload["type"] == "track"
        and e.payload.get("event") == "Site Searched"
        and e.payload["anonymousId"] in viewed
        and e.time > viewed[e.payload["anonymousId"]]
    }
    return [[len(viewed), len(searched)]]


def _retention(valid) -> list[list]:
    days = defaultdict(set)
    for e in filter(_human, valid):
        days[e.payload["anonymousId"]].add(e.time.date())
    counts = Counter()
    for seen in days.values():
        cohort = min(seen)
        counts.update((cohort.isoformat(), (day - cohort).days) for day in seen)
    return [[cohort, n, count] for (cohort, n), count in sorted(counts.items())]


def _referrers(valid) -> dict[str, int]:
    hosts = Counter()
    for e in filter(_human, valid):
        referrer = e.payload["context"].get("page", {}).get("referrer")
        if e.payload["type"] == "page" and referrer and urlparse(referrer).hostname:
            hosts[urlparse(referrer).hostname] += 1
    return dict(hosts)


def _devices(valid) -> dict[tuple, int]:
    from serving.connect.user_agents import describe

    counts = Counter()
    for e in valid:
        ua = describe(e.payload["context"].get("userAgent") or "")
        counts[(ua.device_type, ua.browser, ua.os, ua.is_bot)] += 1
    return dict(counts)


# --- an analyst over Spark Connect -----------------------------------------------------------


@pytest.fixture(scope="module")
def analyst(serving_settings: Settings, sql_server, client_python: Path, tmp_path_factory):
    """What the analyst's script (``sql_client.py``) saw."""
    from layout.lake import silver_path

    job = tmp_path_factory.mktemp("job") / "job.json"
    job.write_text(
        json.dumps(
            {
                "url": serving_settings.sql.url(),
                "queries": doc_queries(),
                "params": PARAMS,
                "lake": serving_settings.lake.root + "/gold/analyst_was_here",
                "silver": silver_path(serving_settings, serving_settings.kafka.events_topic),
            }
        )
    )
    done = subprocess.run(
        [client_python, ROOT / "tests" / "integration" / "serving" / "sql_client.py", job],
        capture_output=True,
        text=True,
        timeout=600,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")},
    )
    errors = [line for line in done.stderr.splitlines() if not line.startswith(("\tat ", "  "))]
    assert done.returncode == 0, "\n".join(errors)[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_analyst_with_only_pyspark_client_lists_the_views(analyst):
    views = set(analyst["views"])
    for name in ("page_activity", "site_activity", "search_terms", "clicks"):
        assert {f"serving_{name}", f"gold_{name}", f"speed_{name}"} <= views
    assert {"serving_boundaries", "events", "events_all"} <= views


def test_the_docs_queries_equal_the_ground_truth(analyst, traffic):
    events, valid = traffic
    rows = analyst["rows"]
    assert [row[:2] for row in rows["top_pages"]] == _top_pages(events)
    assert rows["visitors_by_campaign"] == _visitors_by_campaign(valid)
    assert rows["funnel"] == _funnel(valid)
    assert rows["retention"] == _retention(valid)
    assert any(n > 0 for _, n, _ in rows["retention"]), "no visitor came back: a weak test"
    devices = {tuple(row[:4]): row[4] for row in rows["devices"]}
    assert devices == _devices(valid)
    assert devices[("bot", "Googlebot", None, True)] == 7
    referrers = _referrers(valid)
    expected = sorted(referrers.items(), key=lambda item: (-item[1], item[0]))[:20]
    assert [tuple(row) for row in rows["referrers"]] == expected


def test_events_show_only_what_the_contract_exposes(analyst):
    columns = set(analyst["events_columns"])
    assert {"anonymousId", "event_time", "utm_campaign", "device_type", "is_bot"} <= columns
    assert not columns & {"userId", "traits", "payload", "partition", "offset"}
    assert "page" in analyst["context_fields"]
    assert not set(analyst["context_fields"]) & {"userAgent", "ip"}


def test_the_analyst_cannot_write_or_read_around_the_views(analyst):
    refused = analyst["refused"]
    for action in ("write_lake", "read_silver_path", "sql_path", "drop_view", "python_udf"):
        assert refused[action] and "Refused by the SQL server" in refused[action], action
    assert "userId" in refused["user_id"]  # not a column of events


def test_the_server_reports_its_catalog(sql_server, serving_settings):
    from platformctl.services.sql import healthy

    ok, detail = healthy(serving_settings)
    assert ok, detail
    assert "views" in detail and "silver version" in detail


# --- SQL over HTTP ---------------------------------------------------------------------------


def test_post_sql_answers_a_docs_query(api, sql_server, traffic):
    events, _ = traffic
    answer = api.post("/v1/sql", json={"sql": doc_queries()["top_pages"], "params": PARAMS})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert [c["name"] for c in body["columns"]] == ["path", "views", "visitors"]
    assert [row[:2] for row in body["rows"]] == _top_pages(events)
    csv = api.post(
        "/v1/sql", json={"sql": doc_queries()["top_pages"], "params": PARAMS, "format": "csv"}
    )
    assert csv.status_code == 200 and csv.text.splitlines()[0] == '"path","views","visitors"'


def test_post_sql_refuses_what_it_must(api, serving_url, sql_server):
    def error(payload, **kwargs):
        answer = (kwargs.get("client") or api).post("/v1/sql", json=payload)
        return answer.status_code, answer.json().get("error")

    assert error({"sql": "DROP VIEW events"}) == (400, "read_only")
    assert error({"sql": "INSERT INTO gold_clicks SELECT * FROM gold_clicks"}) == (400, "read_only")
    assert error({"sql": "SELECT 1; SELECT 2"}) == (400, "one_statement")
    assert error({"sql": "SELECT * FROM range(0, 1000)", "max_rows": 10}) == (400, "too_many_rows")
    slow = {"sql": "SELECT max(id * 2) FROM range(0, 1000000000000)", "timeout_s": 3}
    assert error(slow) == (400, "time_limit")
    assert error({"sql": "SELECT * FROM text.`/etc/passwd`"}) == (400, "sql_error")
    with httpx.Client(base_url=serving_url, timeout=30) as anonymous:
        assert error({"sql": "SELECT 1"}, client=anonymous)[0] == 401


def test_a_parameter_is_a_value_never_sql(api, sql_server):
    attack = "x' OR '1'='1'; DROP VIEW events; --"
    query = "SELECT count(*) AS n FROM events WHERE anonymousId = :who"
    answer = api.post("/v1/sql", json={"sql": query, "params": {"who": attack}})
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [[0]]
    still = api.post("/v1/sql", json={"sql": "SELECT count(*) AS n FROM events"})
    assert still.status_code == 200 and still.json()["rows"][0][0] > 0
