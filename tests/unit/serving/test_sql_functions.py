"""The analysts' functions: one list, the table docs/sql.md shows, and what it leaves out."""

from __future__ import annotations

import re

from serving.connect.examples import DOCS
from serving.connect.guard import FUNCTIONS, analyst_functions, functions_table

_TABLE = re.compile(r"<!-- functions: begin -->\n(.*?)\n<!-- functions: end -->", re.DOTALL)


def test_the_docs_table_is_the_list():
    shown = _TABLE.search(DOCS.read_text(encoding="utf-8"))
    assert shown, "docs/sql.md has no <!-- functions: begin --> ... <!-- functions: end --> block"
    assert shown[1] == functions_table(), (
        f"docs/sql.md's table of functions differs from {FUNCTIONS.name}; replace the block "
        f"with:\n{functions_table()}"
    )


def test_each_function_is_listed_once():
    names = [name for group in analyst_functions().values() for name in group]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert len(analyst_functions()) >= 10 and len(names) > 400


def test_nothing_that_opens_files_urls_or_storage_or_grows_unbounded_is_listed():
    names = {name for group in analyst_functions().values() for name in group}
    for name in (
        "from_xml", "schema_of_xml", "xpath", "from_protobuf", "to_protobuf", "from_avro",
        "schema_of_avro", "from_csv", "input_file_name", "input_file_block_start",
        "tvf:table_changes", "tvf:table_changes_by_path", "reflect", "java_method",
        "try_reflect", "aes_decrypt", "collect_list", "collect_set", "array_agg", "string_agg",
        "listagg", "aggregate", "reduce", "printf", "format_string",
    ):  # fmt: skip
        assert name not in names, f"{name} is on the analysts' list"
