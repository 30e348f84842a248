"""The analyst's virtualenv is pinned to what the platform runs and to what fits together."""

from __future__ import annotations

from pathlib import Path

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


def test_compile_sources_writes_bytecode_for_new_and_changed_modules(tmp_path, monkeypatch):
    """Where ``PYTHONDONTWRITEBYTECODE`` is set, only install writes bytecode for the
    project: each module gets it, and a changed module gets it again."""
    import importlib.util
    import os

    from platformctl import install

    module = tmp_path / "core" / "thing.py"
    module.parent.mkdir()
    module.write_text("X = 1\n")
    monkeypatch.setattr(install, "PROJECT_ROOT", tmp_path)
    cached = Path(importlib.util.cache_from_source(str(module)))

    install.compile_sources()
    assert cached.is_file()
    first = cached.read_bytes()

    module.write_text("X = 2\n")
    later = cached.stat().st_mtime + 5  # a source newer than its bytecode, as after an edit
    os.utime(module, (later, later))
    install.compile_sources()
    assert cached.read_bytes() != first


def test_the_installed_packages_hold_bytecode():
    """``uv`` writes none unless asked: every process would compile these on import."""
    import importlib.util

    import great_expectations
    import pyspark.sql

    for package in (pyspark.sql, great_expectations):
        assert Path(importlib.util.cache_from_source(package.__file__)).is_file(), package
