"""SQL texts with their literals masked, as the audit log keeps them.

A statement's text can carry a person's id (``WHERE userId = '42'``), an email in
a comment, a number that is someone's. What the audit keeps is the statement's
shape: every string, number and binary literal becomes ``?`` and every comment
``/*?*/``; identifiers (plain or in backticks), keywords and operators stay.
Read with Spark SQL's lexical rules (:mod:`core.sql_text`): ``'...'`` and ``"..."``
are strings (``\\`` escapes; ``'it''s'`` is two strings), ``X'..'``/``r'..'`` are
strings with a prefix (a raw one has no escapes), ``--`` runs to the end of the line,
``/* */`` comments nest.

>>> mask_literals("SELECT * FROM events WHERE userId = 'u-42' AND n > 3.5e2 -- ana")
'SELECT * FROM events WHERE userId = ? AND n > ? /*?*/'
>>> print(mask_literals("SELECT `it's`, x1, X'0A', 10L, -7 FROM t /* a /* b */ c */"))
SELECT `it's`, x1, ?, ?, -? FROM t /*?*/
>>> mask_literals("SELECT 'unterminated")
'SELECT ?'
"""

from __future__ import annotations

import re

from core.sql_text import past_comment, past_string

__all__ = ["mask_literals"]

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:BD|[LSYDF])?(?![\w])", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z_][\w]*")


def mask_literals(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "'\"":
            out.append("?")
            i = past_string(text, i, c, raw=False)
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
            i = past_comment(text, i)
        elif (word := _WORD.match(text, i)) is not None:
            after = word.end()
            if after < len(text) and text[after] in "'\"" and word.group().upper() in "XRB":
                out.append("?")  # X'..', r'..', b'..'
                i = past_string(text, after, text[after], raw=word.group() in "rR")
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
