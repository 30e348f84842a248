"""Builds the SQL server's guard (the Java sources in ``guard/``) into one jar.

The guard is JVM code, loaded by the server's Spark driver: a session extension
(``ReadOnlyGuard``: the check rule and the parser; ``Grants``: what each
identity may name), a gRPC interceptor of Spark Connect (``ProtocolGuard``:
each call identified by ``Identities`` and ``Oidc`` and bound to its identity,
its statements bounded and audited, ``Call``, ``Audit``), the statements' time
limit (``StatementWatchdog``) and the server's figures (``SqlMetrics``, a Spark
listener). The host keeps its identities current and drains its audit
(:mod:`serving.connect.access`). It is compiled
here, at install time, with the JDK's ``javac`` against the jars of the
installed pyspark (the server's own Spark, Spark Connect's shaded gRPC
included), and rebuilt only when a source or that Spark changes.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from core.log import get_logger, log_event

__all__ = [
    "FUNCTIONS",
    "GUARD_CLASS",
    "INTERCEPTOR_CLASS",
    "LISTENER_CLASS",
    "SOURCES",
    "analyst_functions",
    "build_guard_jar",
    "functions_table",
    "guard_jar",
    "sources",
]

SOURCES = Path(__file__).with_name("guard")
"""The folder of the guard's Java sources: every ``*.java`` in it goes into the jar."""
FUNCTIONS = SOURCES / "analyst-functions.txt"
"""The functions analysts may call, by group: the one list every check reads (bundled in the
jar as ``platform/sql/analyst-functions.txt``), and docs/sql.md's table."""
GUARD_CLASS = "platform.sql.ReadOnlyGuard"
"""The extension's class, for ``spark.sql.extensions``."""
INTERCEPTOR_CLASS = "platform.sql.ProtocolGuard"
"""The gRPC interceptor, for ``spark.connect.grpc.interceptor.classes``."""
LISTENER_CLASS = "platform.sql.SqlMetrics"
"""The listener of Spark Connect's operations, for ``spark.extraListeners``."""
_log = get_logger(__name__)


def guard_jar(state_dir: Path) -> Path:
    """Where the built jar lives."""
    return state_dir / "jars" / "sql-guard" / "platform-sql-guard.jar"


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def sources() -> list[Path]:
    """The guard's Java sources, in a stable order."""
    return sorted(SOURCES.glob("*.java"))


def analyst_functions(path: Path = FUNCTIONS) -> dict[str, list[str]]:
    """Group title -> the names analysts may call in it (``tvf:`` for table-valued ones).

    >>> groups = analyst_functions()
    >>> "repeat" in groups["Strings"], "from_xml" in sum(groups.values(), [])
    (True, False)
    """
    groups: dict[str, list[str]] = {}
    current: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("["):
            current = groups.setdefault(text.split("]", 1)[1].strip(), [])
        else:
            current.extend(name.lower() for name in text.split())
    return groups


def functions_table(path: Path = FUNCTIONS) -> str:
    """docs/sql.md's table of the analysts' functions, one row a group (markdown).

    >>> functions_table().splitlines()[:2]
    ['| group | functions |', '| --- | --- |']
    """
    rows = ["| group | functions |", "| --- | --- |"]
    for group, names in analyst_functions(path).items():
        shown = ", ".join(f"`{_cell(name.removeprefix('tvf:'))}`" for name in names)
        tables = [n for n in names if n.startswith("tvf:")]
        rows.append(
            f"| {group} | {shown} |"
            if not tables
            else f"| {group} | {_plain(names)}; in FROM: {_tvfs(tables)} |"
        )
    return "\n".join(rows)


def _cell(name: str) -> str:
    return name.replace("|", "\\|")


def _plain(names: list[str]) -> str:
    return ", ".join(f"`{_cell(n)}`" for n in names if not n.startswith("tvf:"))


def _tvfs(names: list[str]) -> str:
    return ", ".join(f"`{n.removeprefix('tvf:')}`" for n in names)


def _stamp() -> str:
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in [*sources(), FUNCTIONS]:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()


def build_guard_jar(state_dir: Path) -> Path:
    """The guard's jar, compiled when missing or out of date."""
    jar = guard_jar(state_dir)
    stamp = jar.with_suffix(".sha256")
    if jar.exists() and stamp.exists() and stamp.read_text() == _stamp():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise FileNotFoundError(
            "javac not found: the SQL server's guard is compiled with the JDK (OpenJDK 17). "
            "Install a JDK, not only a JRE."
        )
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as classes:
        argv = [javac, "-nowarn", "--release", "17", "-d", classes]
        argv += ["-cp", f"{_spark_jars()}/*", *map(str, sources())]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed on {SOURCES}:\n{done.stderr[-4000:]}")
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
            archive.write(FUNCTIONS, f"platform/sql/{FUNCTIONS.name}")
        partial.replace(jar)
    stamp.write_text(_stamp())
    log_event(_log, "sql.guard.built", jar=str(jar))
    return jar
