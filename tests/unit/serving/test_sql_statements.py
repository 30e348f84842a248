"""What ``POST /v1/sql`` lets through to the SQL server, decided by parsing the statement."""

from __future__ import annotations

import pytest

from serving.connect.examples import doc_queries
from serving.errors import QueryError
from serving.sql_http import SqlAnswer, check_statement, nesting_depth


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT 1",
        "select path, sum(page_views) from serving_page_activity group by path",
        "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
        "SELECT 1 UNION ALL SELECT 2",
        "VALUES (1, 'a')",
        "DESCRIBE events",
        "SELECT * FROM events WHERE anonymousId = :who;",
        "SELECT 'DROP TABLE x; INSERT INTO y' AS text",  # words in a string are a value
    ],
)
def test_read_only_statements_pass(sql):
    assert check_statement(sql) == sql.strip().rstrip(";")


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("DROP VIEW events", "read_only"),
        ("INSERT INTO gold_clicks SELECT * FROM gold_clicks", "read_only"),
        ("INSERT OVERWRITE DIRECTORY '/tmp/x' SELECT 1", "read_only"),
        ("MERGE INTO t USING s ON t.a = s.a WHEN MATCHED THEN DELETE", "read_only"),
        ("DELETE FROM t WHERE 1 = 1", "read_only"),
        ("UPDATE t SET a = 1", "read_only"),
        ("CREATE TABLE t AS SELECT 1", "read_only"),
        ("CREATE TEMP VIEW v AS SELECT 1", "read_only"),
        ("ALTER VIEW events AS SELECT 1", "read_only"),
        ("CACHE TABLE events", "read_only"),
        ("SET spark.sql.ansi.enabled = false", "read_only"),
        ("ADD JAR /tmp/evil.jar", "read_only"),
        ("SHOW VIEWS", "read_only"),
        ("USE other", "read_only"),
        ("SELECT 1; DROP VIEW events", "one_statement"),
        ("SELECT 1; SELECT 2", "one_statement"),
        ("SELEC 1 FROM", "sql_syntax"),
    ],
)
def test_anything_else_is_refused_with_its_reason(sql, code):
    with pytest.raises(QueryError) as refused:
        check_statement(sql)
    assert refused.value.code == code
    assert refused.value.status == 400


@pytest.mark.parametrize(
    ("sql", "depth"),
    [
        ("SELECT 1", 0),
        ("SELECT ((1)) + (2)", 2),
        ("SELECT '((((' AS a, \"((((\" AS b, `((` AS c", 0),
        ("SELECT 'it\\'s ((' , (1)", 1),
        ("SELECT r'\\' , ((1))", 2),  # a raw string ends at its quote
        ("SELECT 1 -- ((((\n, (2)", 1),
        ("SELECT /* ( /* ( */ ( */ (1)", 1),  # bracketed comments nest
        ("SELECT (((", 3),
    ],
)
def test_nesting_is_counted_outside_literals_and_comments(sql, depth):
    assert nesting_depth(sql) == depth


def test_a_statement_nested_200_deep_is_a_clear_400_before_any_parse():
    # Counted in one scan of the text, so 20,000 levels are refused as 200 are (a parser
    # would recurse into them).
    with pytest.raises(QueryError) as refused:
        check_statement("SELECT " + "(" * 200 + "1" + ")" * 200)
    assert refused.value.code == "statement_too_deep" and refused.value.status == 400
    assert "deeper than the limit of 40" in refused.value.message
    with pytest.raises(QueryError) as deeper:
        check_statement("SELECT " + "(" * 20_000 + "1" + ")" * 20_000, max_depth=40)
    assert deeper.value.code == "statement_too_deep"


def test_deep_nesting_without_parentheses_is_a_400_not_a_recursion_error():
    with pytest.raises(QueryError) as refused:
        check_statement("SELECT " + "NOT " * 3000 + "true")
    assert refused.value.code == "statement_too_deep" and refused.value.status == 400


def test_the_limits_come_from_the_settings():
    assert check_statement("SELECT " + "(" * 10 + "1" + ")" * 10, max_depth=10)
    with pytest.raises(QueryError) as refused:
        check_statement("SELECT " + "(" * 11 + "1" + ")" * 11, max_depth=10)
    assert refused.value.code == "statement_too_deep"
    with pytest.raises(QueryError) as large:
        check_statement("SELECT '" + "x" * 2000 + "'", max_chars=1000)
    assert large.value.code == "statement_too_large"
    assert "2009 characters" in large.value.message


def test_every_docs_query_is_read_only():
    queries = doc_queries()
    assert {"top_pages", "visitors_by_campaign", "funnel", "retention"} <= set(queries)
    for sql in queries.values():
        check_statement(sql)


def test_answers_as_json_csv_and_arrow():
    from datetime import UTC, datetime

    import pyarrow as pa

    table = pa.table(
        {
            "path": ["/a", "/b"],
            "views": [3, 1],
            "sketch": [b"\x01\x02", None],
            "at": pa.array([datetime(2024, 1, 1, tzinfo=UTC)] * 2, pa.timestamp("us", tz="UTC")),
        }
    )
    answer = SqlAnswer(table, 0.5)
    body = answer.json()
    assert [c["name"] for c in body["columns"]] == ["path", "views", "sketch", "at"]
    assert body["rows"][0] == ["/a", 3, "AQI=", "2024-01-01T00:00:00+00:00"]
    assert body["row_count"] == 2
    assert answer.csv().decode().splitlines()[0] == '"path","views","sketch","at"'
    assert pa.ipc.open_stream(answer.arrow()).read_all().equals(table)
