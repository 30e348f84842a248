"""SQL texts with their literals masked, as the audit log keeps them.

A statement's text can carry a person's id (``WHERE userId = '42'``), an email in
a comment, a number that is someone's. What the audit keeps is the statement's
shape: every string, number and binary literal becomes ``?`` and every comment
``/*?*/``; identifiers (plain or in backticks), keywords and operators stay.
Read with Spark SQL's lexical rules: ``'...'`` and ``"..."`` are strings (``\\``
escapes, or a doubled quote), ``X'..'``/``r'..'`` are strings with a prefix,
``--`` runs to the end of the line, ``/* */`` comments nest.

>>> mask_literals("SELECT * FROM events WHERE userId = 'u-42' AND n > 3.5e2 -- ana")
'SELECT * FROM events WHERE userId = ? AND n > ? /*?*/'
>>> print(mask_literals("SELECT `it's`, x1, X'0A', 10L, -7 FROM t /* a /* b */ c */"))
SELECT `it's`, x1, ?, ?, -? FROM t /*?*/
>>> mask_literals("SELECT 'unterminated")
'SELECT ?'
"""

from __future__ import annotations

import re

__all__ = ["mask_literals"]

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:BD|[LSYDF])?(?![\w])", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_][\w]*")


def _string_end(text: str, i: int) -> int:
    """The index after the string literal opened by the quote at ``i``."""
    quote, j = text[i], i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
        elif text[j] == quote:
            if j + 1 < len(text) and text[j + 1] == quote:
                j += 2
            else:
                return j + 1
        else:
            j += 1
    return len(text)


def _comment_end(text: str, i: int) -> int:
    """The index after the (nesting) block comment opened at ``i``."""
    depth, j = 0, i
    while j < len(text):
        if text.startswith("/*", j):
            depth, j = depth + 1, j + 2
        elif text.startswith("*/", j):
            depth, j = depth - 1, j + 2
            if depth == 0:
                return j
        else:
            j += 1
    return len(text)


def mask_literals(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "'\"":
            out.append("?")
            i = _string_end(text, i)
        elif c == "`":
            end = text.find("`", i + 1)
            end = len(text) if end < 0 else end + 1
            out.append(text[i:end])
            i = end
        elif text.startswith("--", i):
            end = text.find("\n", i)
            out.append("/*?*/")
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            out.append("/*?*/")
            i = _comment_end(text, i)
        elif (word := _WORD.match(text, i)) is not None:
            after = word.end()
            if after < len(text) and text[after] in "'\"" and word.group().upper() in "XRB":
                out.append("?")  # X'..', r'..', b'..'
                i = _string_end(text, after)
            else:
                out.append(word.group())
                i = after
        elif (number := _NUMBER.match(text, i)) is not None:
            out.append("?")
            i = number.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)
