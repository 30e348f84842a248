"""How Spark's lexer reads a SQL text's literals and comments, for the checks that read
statements before Spark does: the nesting depth ``/v1/sql`` bounds
(:func:`serving.sql_http.nesting_depth`) and the audit's masking of literals
(:func:`access.masking.mask_literals`). The SQL server's guard reads them the same way
(``serving/connect/guard/SqlText.java``).

>>> sql = "SELECT 'a\\\\'b', r'\\\\' /* x /* y */ z */ 1"
>>> sql[7:past_string(sql, 7, "'", raw=False)], sql[16:past_string(sql, 16, "'", raw=True)]
("'a\\\\'b'", "'\\\\'")
>>> sql[past_comment(sql, 20):]
' 1'
"""

from __future__ import annotations

__all__ = ["identifier_char", "past_comment", "past_string", "raw_prefix"]


def identifier_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def raw_prefix(sql: str, quote_at: int) -> bool:
    """Whether the string literal opening at ``quote_at`` is raw (``r'...'``: no escapes)."""
    i = quote_at
    return i > 0 and sql[i - 1] in "rR" and (i < 2 or not identifier_char(sql[i - 2]))


def past_string(sql: str, start: int, quote: str, raw: bool) -> int:
    """The index after the string literal whose quote is at ``start`` (the end of ``sql``
    when it is not closed); ``\\`` escapes the next character unless ``raw``."""
    i = start + 1
    while i < len(sql):
        if sql[i] == "\\" and not raw:
            i += 2
        elif sql[i] == quote:
            return i + 1
        else:
            i += 1
    return len(sql)


def past_comment(sql: str, start: int) -> int:
    """The index after the bracketed comment opened at ``start``; Spark's comments nest."""
    level, i = 0, start
    while i < len(sql):
        if sql.startswith("/*", i):
            level, i = level + 1, i + 2
        elif sql.startswith("*/", i):
            level, i = level - 1, i + 2
            if level == 0:
                return i
        else:
            i += 1
    return len(sql)
