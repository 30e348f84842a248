"""The audit keeps a statement's shape, never its literals."""

from __future__ import annotations

import pytest

from access.masking import mask_literals


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("SELECT * FROM e WHERE userId = 'u-42'", "SELECT * FROM e WHERE userId = ?"),
        ('SELECT * FROM e WHERE userId = "u-42"', "SELECT * FROM e WHERE userId = ?"),
        ("WHERE a = 'it''s' AND b = 'x\\'y'", "WHERE a = ?? AND b = ?"),  # Spark: two strings
        ("WHERE p RLIKE r'\\' AND q = 1", "WHERE p RLIKE ? AND q = ?"),  # raw: no escape
        ("WHERE n IN (1, 2.5, .5, 1e10, 7L, 3BD)", "WHERE n IN (?, ?, ?, ?, ?, ?)"),
        ("SELECT X'CAFE', r'\\d+', b'1'", "SELECT ?, ?, ?"),
        ("SELECT a -- ana@example.com\nFROM t", "SELECT a /*?*/\nFROM t"),
        ("SELECT /* 42 /* nested */ still */ 1", "SELECT /*?*/ ?"),
        ("SELECT `user 42`, col2, t1.x9 FROM t1", "SELECT `user 42`, col2, t1.x9 FROM t1"),
        ("SELECT 'never closed", "SELECT ?"),
        ("SELECT date'2026-01-01', INTERVAL '1' DAY", "SELECT date?, INTERVAL ? DAY"),
    ],
)
def test_literals_and_comments_are_masked_and_names_kept(text, masked):
    assert mask_literals(text) == masked


def test_no_literal_of_a_statement_survives_the_mask():
    secret = "person-7f3a9"
    for text in (
        f"SELECT * FROM events WHERE userId = '{secret}'",
        f'SELECT * FROM events WHERE userId = "{secret}" -- {secret}',
        f"SELECT /* {secret} */ count(*) FROM events",
        f"SELECT * FROM events WHERE x = '{secret}' OR y = '{secret}''s'",
    ):
        assert secret not in mask_literals(text)
