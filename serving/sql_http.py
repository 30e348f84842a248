"""SQL over HTTP: ``POST /v1/sql`` runs one read-only statement on the SQL server.

The serving API is a Spark Connect client of the SQL server
(:mod:`serving.connect`), so a statement sees exactly the views an analyst's
own Spark Connect session sees, under the same read-only guard. Every
statement runs in a Spark Connect session of its own, released after it
(:class:`serving.connect.remote.SessionSource`): nothing one caller's
statement sets (a time zone, a temporary view, a variable) is seen by any
other, and a restarted SQL server is used again as soon as it answers.

What a statement may do is decided by the SQL server: its own parser and its
check rule on the analysed plan (``serving/connect/guard/``) are the security
boundary. Before it is sent, the statement is also parsed here (sqlglot,
Spark's dialect) to refuse early, with a clear 400, what is plainly not one
read-only query (DML, DDL, ``SET``, ``CACHE``, several statements); sqlglot
does not read SQL exactly as Spark does (a ``--`` comment ending in a
backslash goes on in Spark's lexer), so this check is no boundary. A
statement longer than ``sql.max_statement_chars`` or nested deeper than
``sql.max_statement_depth`` (parentheses outside literals and comments,
:func:`nesting_depth`, the SQL server's own rule) is refused before it is
parsed (``statement_too_large``, ``statement_too_deep``). Parameters are
named (``:start``) and bound by Spark as literals, never pasted into the
text. A row limit (``LIMIT n+1`` on the query: more than ``n`` rows is a
400, not a silent cut) and a time limit (the session's Spark jobs are
interrupted) bound every request; the SQL server unreachable is a 503.

>>> check_statement("SELECT path FROM serving_page_activity WHERE window_start >= :start")
'SELECT path FROM serving_page_activity WHERE window_start >= :start'
>>> check_statement("DROP VIEW gold_clicks")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
serving.errors.QueryError: Only a read-only query (...) is allowed, not Drop.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import datetime as dt
import decimal
import io
import logging
import threading
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.settings import SqlSettings
from core.sql_text import past_comment, past_string, raw_prefix
from serving.errors import QueryError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.connect.session import SparkSession

    from serving.connect.remote import SessionSource

__all__ = ["FORMATS", "SqlAnswer", "SqlEndpoint", "check_statement", "nesting_depth"]

FORMATS = {
    "json": "application/json",
    "csv": "text/csv; charset=utf-8",
    "arrow": "application/vnd.apache.arrow.stream",
}
"""Answer formats by name, with their media types."""
_WRITES = (
    "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterColumn", "Command",
    "Cache", "Uncache", "Set", "Use", "Refresh", "LoadData", "TruncateTable", "Copy", "Pragma",
)  # fmt: skip
"""sqlglot expression classes no statement may contain (the names of this sqlglot version)."""

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to Command" warnings
# pyspark's client logs every failed query with the server's stack; a refused query is the
# analyst's 400 here, not the serving API's error.
logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
# ... and every failed call (a server down or restarting: the caller's 503) with its stack.
logging.getLogger("pyspark.sql.connect.logging").setLevel(logging.CRITICAL)
warnings.filterwarnings("ignore", r"\[RETRIES_EXCEEDED\]", UserWarning)  # the same, once more


def nesting_depth(sql: str, stop_above: int = 1_000_000) -> int:
    """The deepest parenthesis nesting of ``sql`` outside string literals (``'...'``,
    ``"..."``, raw ``r'...'``), quoted identifiers and comments, as Spark's lexer reads
    them; counting stops past ``stop_above``. The SQL server counts the same way
    (``serving/connect/guard/SqlText.java``).

    >>> nesting_depth("SELECT ((1)), '((((' -- ((((")
    2
    >>> nesting_depth("SELECT r'\\' , (1) /* ( /* ( */ ( */")
    1
    """
    depth = deepest = i = 0
    n = len(sql)
    while i < n:
        c = sql[i]
        if sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end + 1
        elif sql.startswith("/*", i):
            i = past_comment(sql, i)
        elif c in "'\"":
            i = past_string(sql, i, c, raw_prefix(sql, i))
        elif c == "`":
            end = sql.find("`", i + 1)
            i = n if end < 0 else end + 1
        else:
            if c == "(":
                depth += 1
                deepest = max(deepest, depth)
                if deepest > stop_above:
                    return deepest
            elif c == ")" and depth:
                depth -= 1
            i += 1
    return deepest


def check_statement(
    sql: str,
    max_chars: int = SqlSettings.model_fields["max_statement_chars"].default,
    max_depth: int = SqlSettings.model_fields["max_statement_depth"].default,
) -> str:
    """``sql`` when it is one read-only statement within the size and nesting limits; else
    :class:`QueryError` (400)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    if len(sql) > max_chars:
        raise QueryError(
            "statement_too_large",
            f"The statement has {len(sql)} characters, more than the limit of {max_chars} "
            "(sql.max_statement_chars); send a shorter statement.",
        )
    if nesting_depth(sql, max_depth) > max_depth:
        raise QueryError(
            "statement_too_deep",
            f"The statement nests parentheses deeper than the limit of {max_depth} "
            "(sql.max_statement_depth); use WITH clauses instead of deep nesting.",
        )
    try:
        trees = [tree for tree in sqlglot.parse(sql, read="spark") if tree is not None]
    except ParseError as error:
        raise QueryError("sql_syntax", f"Not valid Spark SQL: {error}") from None
    except RecursionError:
        raise QueryError(
            "statement_too_deep",
            "The statement is nested too deeply to be checked (functions or expressions "
            "inside one another); use WITH clauses instead of deep nesting.",
        ) from None
    if len(trees) != 1:
        raise QueryError("one_statement", f"Send exactly one statement, not {len(trees)}.")
    (tree,) = trees
    writes = tuple(getattr(exp, name) for name in _WRITES if hasattr(exp, name))
    if not isinstance(tree, (exp.Query, exp.Values, exp.Describe)) or tree.find(*writes):
        found = tree.find(*writes) or tree
        raise QueryError(
            "read_only",
            "Only a read-only query (SELECT, WITH, VALUES or DESCRIBE) is allowed, "
            f"not {type(found).__name__}.",
        )
    return sql.strip().rstrip(";")


@dataclass(frozen=True)
class SqlAnswer:
    """One statement's rows (an Arrow table) and how long it took."""

    table: pa.Table
    seconds: float

    def json(self) -> dict[str, Any]:
        """Columns with their Spark types, rows as lists; binary as base64, times as ISO 8601."""
        columns = [{"name": f.name, "type": str(f.type)} for f in self.table.schema]
        rows = [[_plain(v) for v in row.values()] for row in self.table.to_pylist()]
        return {"columns": columns, "rows": rows, "row_count": len(rows), "seconds": self.seconds}

    def csv(self) -> bytes:
        import pyarrow.csv as pacsv

        out = io.BytesIO()
        pacsv.write_csv(self.table, out)
        return out.getvalue()

    def arrow(self) -> bytes:
        import pyarrow as pa

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.table.schema) as writer:
            writer.write_table(self.table)
        return sink.getvalue().to_pybytes()


def _plain(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class SqlEndpoint:
    """One serving worker's client of the SQL server: each statement in a Spark Connect
    session of its own, over one channel."""

    def __init__(self, sql: SqlSettings) -> None:
        self.settings = sql
        self._sessions: SessionSource | None = None
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="sql")

    def _source(self) -> SessionSource:
        from serving.connect.remote import SessionSource

        with self._lock:
            if self._sessions is None:
                self._sessions = SessionSource(self.settings.url())
            return self._sessions

    def run(
        self,
        sql: str,
        params: dict[str, Any] | None = None,
        *,
        max_rows: int | None = None,
        timeout_s: float | None = None,
        credential: str | None = None,
    ) -> SqlAnswer:
        """The statement's rows; :class:`QueryError` for a refused, failed or too large query.
        It runs as the identity ``credential`` proves to the SQL server (the caller's own:
        its grants, its share of the server, its audit record; default ``sql.token``)."""
        statement = check_statement(
            sql, self.settings.max_statement_chars, self.settings.max_statement_depth
        )
        limit = min(max_rows or self.settings.max_rows, self.settings.max_rows)
        timeout = min(timeout_s or self.settings.time_limit_s, self.settings.time_limit_s)
        sessions = self._source()
        spark = sessions.open(credential)
        began = time.monotonic()
        future = self._pool.submit(_fetch, spark, statement, params or {}, limit)
        future.add_done_callback(lambda _: sessions.release(spark))
        try:
            table = future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            with contextlib.suppress(Exception):  # the server is gone: nothing left to cancel
                spark.interruptAll()
            raise QueryError(
                "time_limit",
                f"The query ran longer than its time limit of {timeout:g} s and was cancelled; "
                "narrow its time range or aggregate more.",
            ) from None
        if table.num_rows > limit:
            raise QueryError(
                "too_many_rows",
                f"The query returns more than {limit} rows; add a LIMIT or aggregate "
                "(the largest answer is sql.max_rows).",
            )
        return SqlAnswer(table, round(time.monotonic() - began, 3))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._sessions is not None:
            self._sessions.close()


def _fetch(spark: SparkSession, statement: str, params: dict[str, Any], limit: int) -> pa.Table:
    try:
        return spark.sql(statement, args=params).limit(limit + 1).toArrow()
    except Exception as error:
        raise _readable(error) from None


_GONE = ("NO_ACTIVE_SESSION", "INVALID_HANDLE.SESSION_")
"""Error conditions of a session the server no longer holds (it restarted): the next
request's new session is served, so these are the server's unavailability, not the query's."""


def _readable(error: Exception) -> QueryError:
    """The engine's error as a 400 (its condition and first line), or 503 when the server is
    unreachable or lost the session (it restarted)."""
    import grpc
    from pyspark.errors import PySparkException
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    text = str(error)
    condition = error.getCondition() if isinstance(error, PySparkException) else None
    code = error.getGrpcStatusCode() if isinstance(error, SparkConnectGrpcException) else None
    if (
        code == grpc.StatusCode.UNAVAILABLE
        or (condition or "").startswith(_GONE)
        or "UNAVAILABLE" in text
        or "failed to connect" in text.lower()
    ):
        return QueryError(
            "sql_unavailable",
            "The SQL server is not reachable or was restarted; retry in a few seconds, and "
            "if it lasts, `platformctl status` shows it (docs/operations.md: the SQL server "
            "is down).",
            status=503,
        )
    if code == grpc.StatusCode.UNAUTHENTICATED:  # revoked since serving read the tokens
        return QueryError("unauthorized", "The SQL server does not know this token.", 401)
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:  # the caller's own statements at once
        said = next((line for line in text.splitlines() if "statements" in line), text)
        return QueryError("too_many_statements", said.strip()[:500], 429)
    first = next((line for line in text.splitlines() if line.strip()), type(error).__name__)
    first = first.replace("(platform.sql.Refusal) ", "")
    prefix = f"{condition}: " if condition and condition not in first else ""
    return QueryError("sql_error", f"{prefix}{first}"[:2000])
