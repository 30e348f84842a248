"""The analysts' examples stay one: the notebook asks the docs' queries, and the docs' DuckDB
setup loads the extension from its package without downloading anything."""

from __future__ import annotations

import json
import re

from serving.connect.examples import NOTEBOOK, doc_queries, duckdb_queries, duckdb_setup


def _words(sql: str) -> str:
    """``sql`` without its comment lines, its whitespace collapsed."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return " ".join(" ".join(lines).split())


def _notebook_code() -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


def test_the_notebook_asks_the_docs_campaign_and_funnel_queries():
    code = _words(_notebook_code())
    for name in ("visitors_by_campaign", "funnel"):
        assert _words(doc_queries()[name]) in code, name


def test_the_notebook_holds_no_token_and_no_output():
    notebook = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    code = _notebook_code()
    assert 'os.environ.get("WAP_SQL__TOKEN"' in code
    assert not re.search(r"token=[\w-]+", code), "a token is written in the notebook"
    for cell in notebook["cells"]:
        assert not cell.get("outputs"), "the notebook is kept without outputs"


def test_the_duckdb_setup_never_downloads_an_extension():
    setup = duckdb_setup()
    assert '"autoinstall_known_extensions": False' in setup
    assert '"autoload_known_extensions": False' in setup
    assert not re.search(r"\bINSTALL\s+\w", setup, re.IGNORECASE), "an INSTALL statement"
    assert "extension_directory" in setup and "duckdb_ext" in setup


def test_every_duckdb_query_reads_a_view_the_setup_names():
    setup = duckdb_setup()
    (gold,) = re.findall(r"for view in \(([^)]*)\)", setup)
    named = {f"gold_{v.strip().strip(chr(34))}" for v in gold.split(",") if v.strip()}
    named |= set(re.findall(r"CREATE VIEW (\w+) AS", setup))
    assert {"gold_page_activity", "gold_site_activity", "silver_web_events"} <= named
    for name, sql in duckdb_queries().items():
        tables = set(re.findall(r"\bFROM\s+(\w+)", sql))
        assert tables and tables <= named, (name, tables - named)
