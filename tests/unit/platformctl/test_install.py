"""The analyst's virtualenv is pinned to what the platform runs and to what fits together."""

from __future__ import annotations

import pyspark

from platformctl.install import ANALYST_LOCK, locked_version


def _pins(path) -> dict[str, str]:
    pins = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if version and not line.startswith((" ", "#")):
            pins[name.strip().lower()] = version.split()[0]
    return pins


def test_the_lock_holds_every_requirement_at_its_pin():
    wanted = _pins(ANALYST_LOCK.with_suffix(".in"))
    assert {"pyspark-client", "duckdb", "duckdb-ext-delta", "nbclient", "ipykernel"} <= set(wanted)
    locked = _pins(ANALYST_LOCK)
    assert {name: locked.get(name) for name in wanted} == wanted


def test_the_client_is_the_platforms_spark_version():
    assert locked_version(ANALYST_LOCK, "pyspark-client") == pyspark.__version__


def test_the_delta_extension_pairs_with_its_duckdb():
    """duckdb-ext-delta's version is DuckDB's followed by a build date: a DuckDB of another
    version refuses to load the extension file."""
    duckdb = locked_version(ANALYST_LOCK, "duckdb")
    extension = locked_version(ANALYST_LOCK, "duckdb-ext-delta")
    assert duckdb and extension
    assert extension.rsplit(".", 1)[0] == duckdb


def test_the_analysts_pandas_is_the_platforms():
    """``toPandas()`` in the analyst's notebook converts with the pandas the platform's Spark
    is tested with."""
    main = ANALYST_LOCK.with_name("main.lock")
    assert locked_version(ANALYST_LOCK, "pandas") == locked_version(main, "pandas")
