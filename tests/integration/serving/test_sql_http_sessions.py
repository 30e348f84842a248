"""``POST /v1/sql`` callers share no state, and a restarted SQL server is used again.

The session's supervised SQL server over the published lake (``sql_server``) and this
module's serving app (real HTTP) with three callers of their own tokens. A statement that
sqlglot reads as a ``SELECT`` of a string is, to Spark, a ``SET`` or a ``CREATE TEMPORARY
VIEW`` (Spark's ``--`` comment goes on past a line ending in a backslash): whatever it does
must end with its request. Then the SQL server's driver is killed: the endpoint says the
server is down (503) and serves again, without a restart of serving, within seconds of the
server's health answering.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.settings import Settings
from tests.support.lake import GROUP
from tests.support.processes import alive, children, java_children
from tests.support.sql import SERVICE_TOKENS

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.xdist_group(GROUP),
]

TOKENS = SERVICE_TOKENS
SERVING = {"api_tokens": TOKENS}
"""This module's serving app: the fixtures' caller (``api``) and two of its own."""
SMUGGLE = "-- \\\nSELECT '\n{statement} -- '"
"""What sqlglot reads as ``SELECT '...'`` (its comment ends at the line's end) and Spark
as ``statement`` (a ``--`` comment ending in a backslash goes on to the next line)."""
ZONE = "SELECT current_timezone() AS zone, CAST(timestamp_millis(0) AS STRING) AS epoch"
UTC_ROW = ["UTC", "1970-01-01 00:00:00"]
PAGES = (
    "SELECT count(*) AS rows, sum(page_views) AS views, count_if(path = 'smuggled') AS fake "
    "FROM serving_page_activity"
)
RECOVERS_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def serving_settings(serving_settings: Settings, sql_server) -> Settings:
    """The SQL server's settings (the published lake's), with this module's serving app."""
    return sql_server.settings.model_copy(update={"serving": serving_settings.serving})


@pytest.fixture(scope="module")
def callers(serving_url: str) -> Iterator[dict[str, httpx.Client]]:
    """An HTTP client per caller, each with its own token."""
    clients = {
        name: httpx.Client(
            base_url=serving_url, headers={"Authorization": f"Bearer {token}"}, timeout=120
        )
        for name, token in TOKENS.items()
    }
    yield clients
    for client in clients.values():
        client.close()


def _rows(client: httpx.Client, sql: str) -> list:
    answer = client.post("/v1/sql", json={"sql": sql})
    assert answer.status_code == 200, answer.text
    return answer.json()["rows"]


def test_a_smuggled_set_time_zone_changes_no_other_callers_zone(callers):
    """Shared by every caller of a serving worker, one Connect session took the smuggled
    ``SET TIME ZONE``: afterwards every caller's answers were in Kiritimati time."""
    assert _rows(callers["analyst"], ZONE) == [UTC_ROW]
    smuggled = callers["attacker"].post(
        "/v1/sql", json={"sql": SMUGGLE.format(statement='SET TIME ZONE "Pacific/Kiritimati"')}
    )
    assert smuggled.status_code in (200, 400), smuggled.text
    later = [_rows(callers[name], ZONE) for name in ("analyst", "tester", "attacker") * 3]
    assert later == [[UTC_ROW]] * 9, f"a caller answered in another zone: {later}"


def test_a_smuggled_temporary_view_shadows_no_view(callers):
    """A smuggled ``CREATE OR REPLACE TEMPORARY VIEW serving_page_activity`` outlived its
    request and answered every later ``serving_page_activity`` of every caller."""
    real = _rows(callers["analyst"], PAGES)
    assert real[0][0] > 0 and real[0][2] == 0, real
    fake = (
        "CREATE OR REPLACE TEMPORARY VIEW serving_page_activity AS "
        'SELECT "smuggled" AS path, 999999 AS page_views'
    )
    smuggled = callers["attacker"].post("/v1/sql", json={"sql": SMUGGLE.format(statement=fake)})
    assert smuggled.status_code in (200, 400), smuggled.text
    later = [_rows(callers[name], PAGES) for name in ("analyst", "tester", "attacker") * 3]
    assert later == [real] * 9, f"the real view was not read: {later}"


def test_the_sql_server_decides_what_sqlglot_let_through(callers):
    """sqlglot is no boundary: a smuggled ``SET`` of a setting outside the allow-list reaches
    the SQL server, whose parser and guard refuse it."""
    answer = callers["attacker"].post(
        "/v1/sql", json={"sql": SMUGGLE.format(statement="SET spark.sql.cbo.enabled=true")}
    )
    assert answer.status_code == 400, answer.text
    assert "cannot be set on the SQL server" in answer.json()["message"], answer.text


def _active_sessions(server) -> float:
    text = httpx.get(f"{server.health_url}/metrics", timeout=30).text
    return next(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "wap_sql_active_sessions"
    )


def test_each_requests_session_is_released(callers, sql_server):
    """A session per request is released after its answer, not left to the server's idle
    timeout (an hour)."""
    before = _active_sessions(sql_server)
    for _ in range(20):
        assert _rows(callers["analyst"], "SELECT 1 AS one") == [[1]]
    deadline = time.monotonic() + 10
    while (held := _active_sessions(sql_server)) > before + 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert held <= before + 2, f"{held - before:.0f} of 20 requests' sessions are still open"


def _answer(client: httpx.Client, sql: str) -> tuple[int, str, str]:
    """Status, error code and message."""
    answer = client.post("/v1/sql", json={"sql": sql}, timeout=120)
    if answer.status_code == 200:
        return 200, "", ""
    body = answer.json()
    return answer.status_code, body.get("error", ""), body.get("message", "")[:300]


def _listens(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_after_a_restart_of_the_sql_server_post_sql_serves_again(callers, sql_server):
    """After a restart every request answered ``400 sql_error [NO_ACTIVE_SESSION]`` for more
    than 10 minutes: the worker's one session was gone and never opened again. Now: 503
    ``sql_unavailable`` while the server is down, 200 within seconds of its health.

    Statements are sent while nothing listens on the server's port, and again once its
    health answers: one that reaches a server whose Spark has just started can be served
    before the server's own session (the one that builds the catalog) is Spark's default,
    and its session then never sees the views (a race of the SQL server's start)."""
    analyst, port = callers["analyst"], sql_server.settings.sql.port
    assert _answer(analyst, "SELECT 1 AS one")[0] == 200  # a session the server holds
    (server,) = children(sql_server.process.pid)
    (driver,) = java_children(server)
    os.kill(driver, signal.SIGKILL)
    answers: list[tuple[float, int, str, str]] = []
    deadline = time.monotonic() + 600
    while True:
        assert time.monotonic() < deadline, f"not restarted:\n{sql_server.log.read_text()[-3000:]}"
        if not _listens(port):
            answers.append((time.monotonic(), *_answer(analyst, "SELECT 1 AS one")))
        if sql_server.answering_after(server):
            break
        time.sleep(0.5)
    healthy = time.monotonic()
    assert not alive(server), "the server whose driver was killed is still running"
    # When the first statement that is answered was sent: a restarted server's first query
    # over the views is a cold one (new executors, the Delta logs read again), and its own
    # time is the query's, not the endpoint's recovery.
    while True:
        sent = time.monotonic()
        answer = _answer(analyst, PAGES)
        if answer[0] == 200:
            break
        answers.append((time.monotonic(), *answer))
        assert time.monotonic() - healthy < RECOVERS_WITHIN_S, answers[-3:]
        time.sleep(0.5)
    took = sent - healthy
    assert took < RECOVERS_WITHIN_S, f"served again {took:.1f} s after the server's health"
    outcomes = {(status, error) for _, status, error, _ in answers}
    assert (503, "sql_unavailable") in outcomes, outcomes
    assert outcomes <= {(200, ""), (503, "sql_unavailable")}, {a[1:] for a in answers}
