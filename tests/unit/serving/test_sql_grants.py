"""What the SQL server's JVM is told: each team's views, the credentials it accepts, and how a
statement it reports becomes an audit record; the audit topic's records as the table's rows."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson

from access.store import Issued
from core.settings import AccessSettings, Settings, SqlSettings
from pipelines import DERIVED, PIPELINES
from pipelines.teams import ADMINS, TEAMS
from serving.connect.access import audit_record
from serving.connect.audit_table import AUDIT_COLUMNS, _after, _row
from serving.connect.catalog import pipeline_views
from serving.connect.grants import ADMIN_ONLY, SHARED, team_grants, view_owners
from serving.connect.host import server_conf
from serving.connect.identities import SQL_SERVICE, identity_table

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_a_team_is_granted_the_views_of_the_pipelines_its_declarations_let_it_read():
    grants = team_grants()
    for pipeline in (*PIPELINES, *DERIVED):  # a derived pipeline's table by its declaration too
        for team in TEAMS:
            readable = pipeline.readable_by(frozenset({team.name}))
            assert all((view in grants[team.name]) == readable for view in pipeline_views(pipeline))
    assert set(grants[ADMINS]) == set(view_owners())  # the admins: every view, the audit too
    assert all(
        set(ADMIN_ONLY).isdisjoint(views) for team, views in grants.items() if team != ADMINS
    )
    assert all(set(SHARED) <= set(views) for views in grants.values() if views)


def test_a_team_that_reads_no_pipeline_is_granted_nothing():
    from pipelines.teams import Team

    assert team_grants(teams=[Team("archivists", "Reads nothing.")]) == {"archivists": []}


def _issued(name: str, expires: datetime | None = None, revoked: datetime | None = None):
    digest = hashlib.sha256(f"wap.{name:0>12}.{'s' * 43}".encode()).hexdigest()
    return Issued(name, digest, name, frozenset({"marketing"}), NOW, expires, revoked)


def test_the_jvm_is_told_the_digests_of_active_tokens_and_of_the_services_tokens():
    settings = Settings(sql=SqlSettings(token="the-sql-servers-own-token"))
    issued = [
        _issued("active"),
        _issued("later", expires=NOW + timedelta(days=1)),
        _issued("expired", expires=NOW - timedelta(seconds=1)),
        _issued("revoked", revoked=NOW - timedelta(days=1)),
    ]
    table = identity_table(settings, issued, {"marketing": ["gold_clicks"]}, now=NOW)
    by_name = {who["name"]: who for who in table["identities"]}
    assert set(by_name) == {"active", "later", SQL_SERVICE, "local-analyst"}
    assert by_name["later"]["expires_ms"] == int((NOW + timedelta(days=1)).timestamp() * 1000)
    assert by_name["active"] | {"digest": "-"} == {
        "digest": "-",
        "name": "active",
        "teams": ["marketing"],
        "source": "token",
        "expires_ms": 0,
    }
    sql = by_name[SQL_SERVICE]
    assert sql["digest"] == hashlib.sha256(b"the-sql-servers-own-token").hexdigest()
    assert (sql["teams"], sql["source"]) == ([ADMINS], "service")
    assert "the-sql-servers-own-token" not in orjson.dumps(table).decode()  # digests only
    assert table["grants"] == {"marketing": ["gold_clicks"]}


def test_the_server_takes_no_shared_token_and_bounds_each_identitys_statements():
    settings = Settings(access=AccessSettings(max_statements=3))
    conf = server_conf(settings, Path("/x/guard.jar"), ("/x/delta.jar",))
    assert "spark.connect.authenticate.token" not in conf
    assert conf["spark.platform.sql.maxStatements"] == "3"


def test_a_statements_record_keeps_no_literal_of_its_text_or_its_error():
    record = audit_record(
        {
            "identity": "ana",
            "teams": ["web-analytics"],
            "source": "token",
            "outcome": "failed",
            "views": ["events"],
            "rows": None,
            "duration_ms": 3,
            "reason": "CAST_INVALID_INPUT: The value 'u-42' of the type STRING cannot be cast",
            "statement": "SELECT CAST(anonymousId AS INT) FROM events WHERE userId = 'u-42'",
            "at_ms": 1700000000000,
        }
    )
    assert "u-42" not in orjson.dumps(record.row()).decode()
    assert record.statement == "SELECT CAST(anonymousId AS INT) FROM events WHERE userId = ?"
    assert (record.identity, record.outcome, record.views, record.at_ms) == (
        "ana",
        "failed",
        ("events",),
        1700000000000,
    )


def test_the_topics_records_become_the_tables_rows_with_where_they_were():
    columns = [column.split(" ")[0] for column in AUDIT_COLUMNS.split(", ")]
    good = _row(
        orjson.dumps(
            audit_record(
                {
                    "identity": "ana",
                    "teams": [],
                    "source": "token",
                    "outcome": "ok",
                    "views": [],
                    "rows": 2,
                    "duration_ms": 1,
                    "reason": None,
                    "statement": "SELECT 1",
                    "at_ms": 5,
                }
            ).row()
        ),
        1,
        40,
    )
    assert list(good) == columns
    assert (good["identity"], good["rows"], good["kafka_partition"], good["kafka_offset"]) == (
        "ana",
        2,
        1,
        40,
    )
    junk = _row(b"not json", 0, 7)
    assert (junk["identity"], junk["teams"], junk["kafka_offset"]) == (None, [], 7)
    assert _after([good, _row(b"{}", 1, 41)], {0: 3, 1: 40}) == {0: 3, 1: 42}
