"""Teams on one SQL server: each analyst is the identity of their own token, sees the views
their teams are granted and nothing else, is bounded in statements, and is audited.

The session's SQL server (``sql_server``, over the published lake) is the one under test;
tokens are issued into its keyspace as ``platformctl access issue`` issues them
(:class:`access.store.TokenStore`), and the server learns them within ``access.refresh_s``.
Analysts connect over Spark Connect with PySpark's client (``serving.connect.remote``), as
any client would: the token in the URL, and whatever user id they like.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest

from tests.support.lake import GROUP
from tests.support.sql import sql_metrics

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(1200),
    pytest.mark.xdist_group(GROUP),
]

RUN = uuid.uuid4().hex[:6]
ANA, BO, CY, DEE, EVE, OLGA = (f"{who}-{RUN}" for who in ("ana", "bo", "cy", "dee", "eve", "olga"))
SECRET = "secret-id-123"
LONG = "SELECT max(sha2(CAST(id AS STRING), 256)) FROM range(0, 100000000000, 1, 2)"
"""A statement that runs until its time limit, unless interrupted."""


def _until(condition: Callable[[], Any], timeout_s: float, what: str) -> float:
    """Seconds until ``condition()`` is truthy; fails after ``timeout_s``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        if condition():
            return time.monotonic() - began
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {timeout_s} s")


def _error(action: Callable[[], Any]) -> Exception | None:
    try:
        action()
    except Exception as error:  # the server's answer, checked by the caller
        return error
    return None


def _first_line(error: Exception | None) -> str:
    return str(error).strip().splitlines()[0] if error else ""


@pytest.fixture(scope="module")
def server(sql_server):
    return sql_server


@pytest.fixture(scope="module")
def store(server) -> Iterator[Any]:
    from access.store import TokenStore
    from core.cassandra import connect

    cluster, session = connect(server.settings.cassandra)
    store = TokenStore(session, server.settings.cassandra.keyspace)
    store.create()
    yield store
    cluster.shutdown()


@pytest.fixture(scope="module")
def tokens(store) -> dict[str, str]:
    """Tokens of analysts of two teams, of one of no team, and two more to revoke or to
    crowd the server with statements."""
    teams = {ANA: ["web-analytics"], BO: ["shop-data"], CY: [], DEE: ["marketing"]}
    teams[EVE] = ["web-analytics"]
    return {name: store.issue(name, team).text for name, team in teams.items()}


@pytest.fixture(scope="module")
def connect(server, tokens) -> Iterator[Callable[..., Any]]:
    """``connect(token, **params)``: a new Spark Connect session with that token (and URL
    parameters such as ``user_id``), once the server serves the token."""
    from serving.connect.remote import close_session, remote_session

    base = server.settings.sql.url().split(";token=", 1)[0]
    opened: list[Any] = []

    def session(token: str, **params: str) -> Any:
        extra = "".join(f";{key}={value}" for key, value in params.items())
        spark = remote_session(f"{base};token={token}{extra}")
        opened.append(spark)
        return spark

    _until(
        lambda: _error(lambda: session(tokens[EVE]).sql("SELECT 1").collect()) is None,
        10,
        "the issued tokens served",
    )
    yield session
    for spark in opened:
        close_session(spark)


def _views(spark) -> set[str]:
    return {row.viewName for row in spark.sql("SHOW VIEWS").collect()}


# --- what each identity sees -----------------------------------------------------------------


def test_each_team_sees_the_views_of_its_pipelines_and_nothing_else(server, tokens, connect):
    from serving.connect.grants import team_grants, view_owners

    catalog = set(server.health()["views"])
    assert catalog <= set(view_owners()), "every view the server makes belongs to someone"
    grants = team_grants()
    ana, bo, cy = (connect(tokens[name]) for name in (ANA, BO, CY))
    admin = connect(server.settings.sql.token.get_secret_value())  # sql-service: an admin
    assert _views(admin) == catalog
    assert "audit_log" in catalog
    assert _views(ana) == catalog & set(grants["web-analytics"])
    assert _views(bo) == catalog & set(grants["shop-data"])
    assert {"gold_page_activity", "events", "serving_boundaries"} <= _views(ana)
    assert not any("orders_by_currency" in view for view in _views(ana))
    assert {"gold_orders_by_currency", "serving_orders_by_currency"} <= _views(bo)
    assert not _views(bo) & {"events", "events_all", "gold_page_activity", "audit_log"}
    assert _views(cy) == set()  # no team: an empty catalog, not an error
    assert [t.name for t in cy.catalog.listTables()] == []

    count = "SELECT count(*) AS n FROM gold_page_activity"
    assert ana.sql(count).first().n == admin.sql(count).first().n > 0
    # A derived pipeline's table, to its readers, without the fields its contract hides.
    sessions = ana.sql("SELECT * FROM web_sessions").columns
    assert "session_id" in sessions and not {"visitor_id", "user_id"} & set(sessions)
    assert "web_sessions" not in _views(bo)


def test_another_teams_view_is_refused_as_a_view_that_does_not_exist(tokens, connect):
    ana = connect(tokens[ANA])
    refusals = {
        "granted elsewhere": _error(
            lambda: ana.sql("SELECT count(*) FROM gold_orders_by_currency").collect()
        ),
        "no such view": _error(lambda: ana.sql("SELECT count(*) FROM payroll").collect()),
        "admins' only": _error(lambda: ana.table("audit_log").count()),
        "another case": _error(
            lambda: ana.sql("SELECT * FROM default.GOLD_ORDERS_BY_CURRENCY").collect()
        ),
        "its columns": _error(lambda: ana.sql("DESCRIBE serving_orders_by_currency").collect()),
        "a DataFrame": _error(lambda: ana.table("gold_orders_by_currency").schema),
        "a view over it": _error(
            lambda: ana.sql("CREATE TEMP VIEW mine AS SELECT * FROM gold_orders_by_currency")
        ),
    }
    said = {case: _first_line(error) for case, error in refusals.items()}
    refused = "Refused by the SQL server: {} is not granted to " + ANA + "."
    assert said == {
        "granted elsewhere": refused.format("gold_orders_by_currency"),
        "no such view": refused.format("payroll"),
        "admins' only": refused.format("audit_log"),
        "another case": refused.format("gold_orders_by_currency"),
        "its columns": refused.format("serving_orders_by_currency"),
        "a DataFrame": refused.format("gold_orders_by_currency"),
        "a view over it": refused.format("gold_orders_by_currency"),
    }
    # Its own temporary views and CTEs are its own.
    ana.sql("SELECT 7 AS x").createOrReplaceTempView("mine")
    assert ana.sql("WITH q AS (SELECT x FROM mine) SELECT x FROM q").first().x == 7


def test_a_forged_user_id_changes_nothing(tokens, connect):
    ana = connect(tokens[ANA])
    forged = connect(tokens[ANA], user_id="mallory")
    assert _views(forged) == _views(ana)
    said = _first_line(_error(lambda: forged.sql("SELECT * FROM gold_orders_by_currency").count()))
    assert said.endswith(f"gold_orders_by_currency is not granted to {ANA}.")

    # Another identity naming ana's session and user id gets a session of its own.
    ana.sql("SELECT 1 AS x").createOrReplaceTempView("anas_own")
    session_id = ana.client._session_id
    bo = connect(tokens[BO], user_id=ANA, session_id=session_id)
    assert "anas_own" in _views(ana)
    assert "anas_own" not in _views(bo)
    assert "is not granted to " + BO in _first_line(_error(lambda: bo.table("anas_own").count()))


def test_a_statement_over_http_runs_as_its_caller(server, tokens, connect):
    """``POST /v1/sql``'s client sends each caller's own credential: the caller's grants,
    not the serving API's, decide what a statement may read."""
    from serving.errors import QueryError
    from serving.sql_http import SqlEndpoint

    endpoint = SqlEndpoint(server.settings.sql)
    orders = "SELECT count(*) AS n FROM gold_orders_by_currency"
    try:
        assert endpoint.run(orders, credential=tokens[BO]).table.num_rows == 1
        with pytest.raises(QueryError) as refused:
            endpoint.run(orders, credential=tokens[ANA])
        assert refused.value.message.endswith(f"gold_orders_by_currency is not granted to {ANA}.")
        pages = "SELECT count(*) AS n FROM serving_page_activity"
        assert endpoint.run(pages, credential=tokens[ANA]).table.num_rows == 1
        with pytest.raises(QueryError) as unknown:
            endpoint.run("SELECT 1", credential="not-a-token")
        assert (unknown.value.status, unknown.value.code) == (401, "unauthorized")
    finally:
        endpoint.close()


def test_a_revoked_token_stops_working_within_5_s(store, tokens, connect):
    dee = connect(tokens[DEE])
    assert dee.sql("SELECT count(*) AS n FROM serving_page_activity").first().n >= 0
    assert store.revoke(DEE) != []
    took = _until(
        lambda: _error(lambda: dee.sql("SELECT 1").collect()) is not None, 5, "the revocation"
    )
    revoked = _error(lambda: connect(tokens[DEE]).sql("SELECT 1").collect())
    unknown = _error(lambda: connect(f"wap.{'0' * 12}.{'x' * 43}").sql("SELECT 1").collect())
    malformed = _error(lambda: connect("not-a-token").sql("SELECT 1").collect())
    for error in (revoked, unknown, malformed):
        assert error is not None and error.getGrpcStatusCode() == grpc.StatusCode.UNAUTHENTICATED
    # No word of which part failed: the same answer to each.
    assert _details(revoked) == _details(unknown) == _details(malformed)
    print(f"a revoked token stopped working after {took:.2f} s")


def _details(error: Exception | None) -> str:
    text = str(error)
    return text[text.find("details = ") :].split("\n", 1)[0]


def test_an_identity_providers_signed_token_is_an_identity_of_its_own(oidc_provider, connect):
    """The server trusts ``oidc_provider`` (the session's server's settings): its signed
    tokens are checked in the driver against its published keys."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from serving.connect.grants import team_grants

    olga = connect(oidc_provider.token(OLGA, ["shop-data", "no-such-team"]))
    assert _views(olga) <= set(team_grants()["shop-data"])
    assert "gold_orders_by_currency" in _views(olga)
    said = _first_line(_error(lambda: olga.table("gold_clicks").count()))
    assert said == f"Refused by the SQL server: gold_clicks is not granted to {OLGA}."
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    refused = {
        "expired": oidc_provider.token("olga", ["shop-data"], exp=int(time.time()) - 5),
        "another issuer": oidc_provider.token("olga", ["shop-data"], iss="https://evil.test/"),
        "another audience": oidc_provider.token("olga", ["shop-data"], aud="someone-else"),
        "another key": oidc_provider.token("olga", ["shop-data"], key=other),
    }
    codes = {
        case: getattr(
            _error(lambda t=t: connect(t).sql("SELECT 1").collect()),
            "getGrpcStatusCode",
            lambda: None,
        )()
        for case, t in refused.items()
    }
    assert codes == dict.fromkeys(refused, grpc.StatusCode.UNAUTHENTICATED)


# --- what one identity may take --------------------------------------------------------------


def test_one_statement_more_than_the_bound_is_refused_and_the_others_answer(
    server, tokens, connect
):
    most = server.settings.access.max_statements
    sessions = [connect(tokens[EVE]) for _ in range(most)]
    ended: dict[int, Exception | None] = {}

    def run(n: int) -> None:
        ended[n] = _error(lambda: sessions[n].sql(LONG).collect())

    threads = [threading.Thread(target=run, args=(n,)) for n in range(most)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(3)  # both admitted and running
        began = time.monotonic()
        extra = _error(lambda: connect(tokens[EVE]).sql("SELECT 1").collect())
        refused_in = time.monotonic() - began
        assert extra is not None and extra.getGrpcStatusCode() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert f"{EVE} already runs {most} statements at once" in str(extra)
        assert refused_in < 5, "refused at once, not queued"
        others = connect(tokens[ANA])
        assert others.sql("SELECT 1 AS x").first().x == 1  # other identities answer
        assert all(thread.is_alive() for thread in threads)
    finally:
        for spark in sessions:
            spark.interruptAll()
        for thread in threads:
            thread.join(60)
    assert all(ended[n] is not None for n in range(most))  # interrupted, not finished
    _until(
        lambda: _error(lambda: connect(tokens[EVE]).sql("SELECT 1").collect()) is None,
        15,
        "a statement admitted again",
    )
    metrics = sql_metrics(server)
    assert metrics[("wap_sql_refusals_total", ("reason", "concurrency"))] >= 1


# --- the audit -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def audited(server, tokens, connect, spark, tmp_path_factory) -> list[dict]:
    """The statements of this module's analysts, as the audit table holds them once the
    records on the topic are landed (by the server's own code, here in this process)."""
    from serving.connect.audit_table import AuditTable

    ana = connect(tokens[ANA])
    ana.sql(f"SELECT count(*) AS n FROM gold_page_activity WHERE path = '{SECRET}'").collect()
    _error(
        lambda: ana.sql(
            f"SELECT * FROM gold_orders_by_currency WHERE currency = '{SECRET}'"
        ).collect()
    )
    connect(tokens[ANA], user_id="mallory").sql("SELECT 42 AS answer").collect()
    ana.table("gold_clicks").groupBy("target").count().limit(1).collect()
    names = {ANA, BO, CY, DEE, EVE, OLGA, "mallory"}

    table = AuditTable(server.settings, tmp_path_factory.mktemp("audit"))
    admin = connect(server.settings.sql.token.get_secret_value())

    def rows() -> list[dict]:
        table.land(spark)
        found = admin.sql(
            "SELECT * FROM audit_log WHERE identity IN ({})".format(
                ", ".join(f"'{n}'" for n in sorted(names))
            )
        ).collect()
        return [row.asDict() for row in found]

    try:
        _until(
            lambda: any(r["statement"] == "SELECT ? AS answer" for r in rows()),
            30,
            "the audit records landed",
        )
        table.land(spark)  # again: what it landed before is not landed twice
        found = rows()
        landed = spark.read.format("delta").load(table.path)
        twice = landed.groupBy("kafka_partition", "kafka_offset").count().where("count > 1")
        assert twice.count() == 0, "a record landed twice"
    finally:
        table.close()
    return found


def test_every_statement_is_in_the_audit_table_with_its_literals_masked(audited):
    ana = [r for r in audited if r["identity"] == ANA]
    shown = {(r["outcome"], r["statement"], tuple(r["views"])) for r in ana}
    assert {
        (
            "ok",
            "SELECT count(*) AS n FROM gold_page_activity WHERE path = ?",
            ("gold_page_activity",),
        ),
        ("refused", "SELECT * FROM gold_orders_by_currency WHERE currency = ?", ()),
        ("ok", "SELECT ? AS answer", ()),  # the forged user id is audited as ana
        ("ok", "DataFrame: limit < aggregate < read gold_clicks", ("gold_clicks",)),
    } <= shown
    counted = next(r for r in ana if r["views"] == ["gold_page_activity"])
    assert (counted["rows"], counted["teams"], counted["source"]) == (1, ["web-analytics"], "token")
    assert counted["service"] == "sql" and counted["action"] == "statement"
    assert counted["duration_ms"] > 0 and counted["at"] is not None
    refused = next(
        r for r in ana if r["outcome"] == "refused" and "gold_orders_by_currency" in r["statement"]
    )
    assert refused["reason"].startswith("not_granted: ")
    assert not any(r["identity"] == "mallory" for r in audited)
    olga = [r for r in audited if r["identity"] == OLGA]
    assert olga and {(r["source"], tuple(r["teams"])) for r in olga} == {
        ("oidc", ("no-such-team", "shop-data"))
    }
    assert not any(SECRET in str(r) for r in audited), "literals masked"
    # One record per statement: SHOW VIEWS once each, not again when its rows are read.
    assert sum(r["statement"] == "SHOW VIEWS" and r["identity"] == CY for r in audited) == 1


def test_only_the_admins_read_the_audit_and_metrics_count_teams_not_names(
    server, tokens, connect, audited
):
    said = _first_line(_error(lambda: connect(tokens[BO]).sql("SELECT * FROM audit_log").count()))
    assert said == f"Refused by the SQL server: audit_log is not granted to {BO}."
    metrics = sql_metrics(server)
    teams = {
        tuple(labels) for (name, *labels) in metrics if name == "wap_sql_team_statements_total"
    }
    assert (("outcome", "ok"), ("team", "web-analytics")) in teams
    assert (("outcome", "refused"), ("team", "web-analytics")) in teams
    assert not any(RUN in str(labels) for labels in teams), "no names in labels"
    parts = {
        dict(labels)["part"] for (name, *labels) in metrics if name.startswith("wap_sql_access_")
    }
    assert parts >= {"identify", "bind", "admit", "grants", "audit"}, "access timed by part"
