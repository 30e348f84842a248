"""Builds the read-only guard (``guard/ReadOnlyGuard.java``) into a jar for the SQL server.

The guard is a Spark session extension, so it is JVM code; it is compiled
here, at install time, with the JDK's ``javac`` against the jars of the
installed pyspark (the server's own Spark), and rebuilt only when its source
or that Spark changes.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from core.log import get_logger, log_event

__all__ = ["GUARD_CLASS", "SOURCE", "build_guard_jar", "guard_jar"]

SOURCE = Path(__file__).with_name("guard") / "ReadOnlyGuard.java"
GUARD_CLASS = "platform.sql.ReadOnlyGuard"
"""The extension's class, for ``spark.sql.extensions``."""
_log = get_logger(__name__)


def guard_jar(state_dir: Path) -> Path:
    """Where the built jar lives."""
    return state_dir / "jars" / "sql-guard" / "platform-sql-guard.jar"


def _spark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _stamp() -> str:
    import pyspark

    return hashlib.sha256(SOURCE.read_bytes() + pyspark.__version__.encode()).hexdigest()


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
        argv += ["-cp", f"{_spark_jars()}/*", str(SOURCE)]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed on {SOURCE}:\n{done.stderr[-4000:]}")
        partial = jar.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(classes).rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)
    stamp.write_text(_stamp())
    log_event(_log, "sql.guard.built", jar=str(jar))
    return jar
