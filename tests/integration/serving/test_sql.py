"""The SQL server and ``POST /v1/sql`` against simulated traffic and its ground truth.

Two days of simulated traffic (and seven events of a crawler) go through
Kafka and the real batch pipeline (bronze -> silver -> gold -> publish) into
a lake and keyspace of their own (``published_lake``, shared with the security
tests); the SQL server (``python -m serving.connect``) runs as its own process
on them. An analyst's script, in the analyst's virtualenv (tools from PyPI,
nothing of this repository), connects over Spark Connect with ``pyspark-client``, lists the
views and runs the example queries of ``docs/sql.md``; their answers must
equal the truth computed here from the sent events. The HTTP endpoint answers
the same queries and refuses what it must.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from core.settings import Settings
from serving.connect.examples import doc_queries
from tests.support import sql_truth as truth
from tests.support.lake import GROUP

# The first test builds the SQL lake (the batch pipeline over two days of traffic) and
# starts the server: minutes on a busy machine.
# One worker builds the session's published lake once for every module reading it.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

ROOT = Path(__file__).resolve().parents[3]
PARAMS = {"start": "2024-03-01T00:00:00Z", "end": "2024-03-10T00:00:00Z"}


@pytest.fixture(scope="module")
def serving_settings(serving_settings: Settings, sql_server) -> Settings:
    """The SQL server's settings (the published lake's), with this module's serving app."""
    return sql_server.settings.model_copy(update={"serving": serving_settings.serving})


@pytest.fixture(scope="module")
def traffic(published_lake):
    """(events sent, valid ones) of the SQL lake."""
    return published_lake.events, published_lake.valid


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
    assert [row[:2] for row in rows["top_pages"]] == truth.top_pages(events)
    assert rows["visitors_by_campaign"] == truth.visitors_by_campaign(valid)
    assert rows["funnel"] == truth.funnel(valid)
    assert rows["retention"] == truth.retention(valid)
    assert any(n > 0 for _, n, _ in rows["retention"]), "no visitor came back: a weak test"
    devices = {tuple(row[:4]): row[4] for row in rows["devices"]}
    assert devices == truth.devices(valid)
    assert devices[("bot", "Googlebot", None, True)] == 7
    referrers = truth.referrers(valid)
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
    assert [row[:2] for row in body["rows"]] == truth.top_pages(events)
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
