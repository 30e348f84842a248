"""Install what the local platform needs, only when it is missing or out of date.

JVM parts come from Maven Central through the small Maven projects in
``infra/local/maven/<component>``; Airflow gets its own virtualenv; the
website tracking libraries (analytics-next, the RudderStack and Segment
JavaScript SDKs) come from the npm registry, pinned by
``infra/local/npm/package-lock.json``; the analyst's tools (Spark Connect's client,
DuckDB, a notebook kernel) get a virtualenv of their own from
``requirements/analyst.lock``. A stamp
next to each output records the sha256 of its inputs, so ``install`` twice is
a no-op and a changed pom or lock reinstalls.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

from core.log import get_logger, log_event
from core.settings import PROJECT_ROOT, Settings
from platformctl.airflow_venv import ensure_airflow_venv

__all__ = [
    "ANALYST_LOCK",
    "CHROMIUM",
    "JAR_COMPONENTS",
    "analyst_python",
    "install",
    "install_airflow",
    "install_analyst_client",
    "install_browser",
    "install_class_archive",
    "install_jars",
    "install_npm",
    "install_prometheus",
    "jars_dir",
    "locked_version",
    "npm_modules",
]

JAR_COMPONENTS = ("kafka", "cassandra", "spark")
CHROMIUM = Path("/usr/bin/chromium")
"""Debian's Chromium: the headless browser the dashboard test drives (with chromedriver)."""
_log = get_logger(__name__)


def jars_dir(settings: Settings, component: str) -> Path:
    return settings.local.state_dir / "jars" / component


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def install_jars(settings: Settings, component: str) -> Path:
    """Copy ``component``'s jars from Maven Central into the state directory."""
    if component not in JAR_COMPONENTS:
        raise ValueError(f"Unknown jar component {component!r}; expected one of {JAR_COMPONENTS}.")
    pom = PROJECT_ROOT / "infra" / "local" / "maven" / component / "pom.xml"
    target = jars_dir(settings, component)
    stamp = target / ".pom.sha256"
    if stamp.exists() and stamp.read_text() == _sha256(pom):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError(
            "Maven (`mvn`) is not on PATH; it fetches Kafka, Cassandra and the Spark "
            "connectors from Maven Central. Install it (Debian: `apt-get install maven`)."
        )
    started = time.monotonic()
    log_event(_log, "install.jars.start", component=component, target=str(target))
    if target.exists():
        shutil.rmtree(target)
    result = subprocess.run(
        [
            mvn,
            "-q",
            "-B",
            "-Dstyle.color=never",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            f"-Djars.dir={target}",
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"Maven could not fetch the {component} jars (exit {result.returncode}):\n"
            + "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        )
    stamp.write_text(_sha256(pom))
    log_event(
        _log,
        "install.jars.done",
        component=component,
        jars=len(list(target.glob("*.jar"))),
        seconds=round(time.monotonic() - started, 1),
    )
    return target


def install_browser() -> None:
    """Debian's ``chromium`` and ``chromium-driver`` for the dashboard's browser test.

    A no-op when ``/usr/bin/chromium`` exists; otherwise installed with apt-get
    (as root), never downloaded by a test tool.
    """
    if CHROMIUM.exists() and Path("/usr/bin/chromedriver").exists():
        return
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise RuntimeError(
            "The dashboard test needs Chromium: run as root "
            "`apt-get install -y --no-install-recommends chromium chromium-driver`."
        )
    started = time.monotonic()
    log_event(_log, "install.browser.start", packages=["chromium", "chromium-driver"])
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        [apt, "update", "-q"],
        [apt, "install", "-y", "-q", "--no-install-recommends", "chromium", "chromium-driver"],
    ):
        result = subprocess.run(argv, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(argv)}` failed (exit {result.returncode}):\n"
                + "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            )
    log_event(_log, "install.browser.done", seconds=round(time.monotonic() - started, 1))


def install_prometheus() -> Path:
    """Debian's ``prometheus`` (with ``promtool``), installed when missing; its path."""
    found = shutil.which("prometheus")
    if found is None:
        started = time.monotonic()
        log_event(_log, "install.prometheus.start", packages=["prometheus"])
        found = _apt_install(["--no-install-recommends", "prometheus"], "prometheus")
        log_event(_log, "install.prometheus.done", seconds=round(time.monotonic() - started, 1))
    return Path(found)


def npm_modules(settings: Settings) -> Path:
    """The ``node_modules`` of the pinned browser libraries (``infra/local/npm``)."""
    return settings.local.state_dir / "npm" / "node_modules"


def install_npm(settings: Settings) -> Path:
    """``npm ci`` of ``infra/local/npm`` into the state directory; its ``node_modules``.

    A no-op while the lock file is unchanged. Node.js and npm come from Debian
    (``apt-get install nodejs npm``) when they are missing; nothing is
    downloaded at test or run time.
    """
    source = PROJECT_ROOT / "infra" / "local" / "npm"
    target = settings.local.state_dir / "npm"
    stamp = target / ".lock.sha256"
    lock = source / "package-lock.json"
    digest = _sha256(source / "package.json") + _sha256(lock)
    if stamp.exists() and stamp.read_text() == digest and (target / "node_modules").is_dir():
        return target / "node_modules"
    npm = shutil.which("npm") or _apt_install(["nodejs", "npm"], "npm")
    started = time.monotonic()
    log_event(_log, "install.npm.start", target=str(target))
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(source / name, target / name)
    result = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
        cwd=target,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"`npm ci` in {target} failed (exit {result.returncode}):\n"
            + "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        )
    stamp.write_text(digest)
    log_event(_log, "install.npm.done", seconds=round(time.monotonic() - started, 1))
    return target / "node_modules"


def _apt_install(packages: list[str], program: str) -> str:
    """Install Debian ``packages`` (as root) and return the path of ``program``."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise RuntimeError(
            f"`{program}` is missing: run as root `apt-get install -y {' '.join(packages)}`."
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in ([apt, "update", "-q"], [apt, "install", "-y", "-q", *packages]):
        result = subprocess.run(argv, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise RuntimeError(
                f"`{' '.join(argv)}` failed (exit {result.returncode}):\n"
                + "\n".join((result.stdout + result.stderr).splitlines()[-20:])
            )
    found = shutil.which(program)
    if found is None:
        raise RuntimeError(f"`apt-get install {' '.join(packages)}` left no `{program}` on PATH.")
    return found


def install_airflow(settings: Settings) -> Path:
    """Airflow's venv from ``requirements/airflow.lock`` (a no-op when up to date); its python."""
    return ensure_airflow_venv(
        settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
    )


def analyst_python(settings: Settings) -> Path:
    """The interpreter of the analyst's virtualenv (``requirements/analyst.in``)."""
    return settings.local.state_dir / "analyst-venv" / "bin" / "python"


ANALYST_LOCK = PROJECT_ROOT / "requirements" / "analyst.lock"
"""The analyst's tools, pinned with their hashes: ``pyspark-client``, DuckDB with its Delta
extension, and what runs ``docs/notebooks/analyst.ipynb`` headless."""


def locked_version(lock: Path, package: str) -> str | None:
    """The version ``lock`` (a ``uv pip compile`` output) pins ``package`` at, if any.

    >>> locked_version(ANALYST_LOCK, "duckdb-ext-delta").startswith("1.4.4.")
    True
    """
    for line in lock.read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == package and version:
            return version.split()[0]
    return None


def install_analyst_client(settings: Settings) -> Path:
    """The analyst's virtualenv from ``requirements/analyst.lock`` (a no-op while the lock
    is unchanged): what an analyst installs on their own machine. Its ``pyspark-client``
    must be the server's Spark version; the SQL, DuckDB and notebook tests run in it."""
    import sys

    import pyspark

    pinned = locked_version(ANALYST_LOCK, "pyspark-client")
    if pinned != pyspark.__version__:
        raise RuntimeError(
            f"requirements/analyst.lock pins pyspark-client {pinned}, but the platform runs "
            f"Spark {pyspark.__version__}: set pyspark-client=={pyspark.__version__} in "
            "requirements/analyst.in and compile the lock again (the command is in the file)."
        )
    python = analyst_python(settings)
    venv = python.parents[1]
    wanted = _sha256(ANALYST_LOCK)
    stamp = venv / ".lock.sha256"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    started = time.monotonic()
    uv = Path(sys.executable).with_name("uv")
    subprocess.run([uv, "venv", "-q", "--clear", "--python", sys.executable, venv], check=True)
    sync = [uv, "pip", "sync", "-q", "--compile-bytecode", "--python", python, ANALYST_LOCK]
    subprocess.run(sync, check=True)
    stamp.write_text(wanted)
    log_event(_log, "install.analyst_client.done", seconds=round(time.monotonic() - started, 1))
    return python


def _class_archive_key(settings: Settings) -> str:
    """What the archive depends on: the JVM, Spark's jars, the connector jars, the workload."""
    import pyspark

    java = shutil.which("java") or "java"
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    jars = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar"))
    jars += sorted(jars_dir(settings, "spark").glob("*.jar"))
    workload = PROJECT_ROOT / "platformctl" / "class_archive.py"
    parts = [os.path.realpath(java), version, *(j.name for j in jars), _sha256(workload)]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def install_class_archive(settings: Settings) -> Path:
    """The local Spark driver's class archive (:mod:`platformctl.class_archive`), made again
    when the JVM, the jars or the workload change."""
    import sys

    from core.settings import child_env
    from core.spark import local_class_archive

    archive = local_class_archive(settings.local.state_dir)
    stamp = archive.with_name("classes.key")
    key = _class_archive_key(settings)
    if archive.exists() and stamp.exists() and stamp.read_text() == key:
        return archive
    started = time.monotonic()
    log_event(_log, "install.class_archive.start", target=str(archive))
    archive.unlink(missing_ok=True)  # drivers start without it meanwhile
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_name("classes.jsa.partial")
    partial.unlink(missing_ok=True)
    result = subprocess.run(
        [sys.executable, "-m", "platformctl.class_archive", str(partial)],
        cwd=PROJECT_ROOT,
        env=child_env(settings),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0 or not partial.exists():
        raise RuntimeError(
            f"The Spark driver's class archive was not written (exit {result.returncode}):\n"
            + "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        )
    partial.rename(archive)  # whole or absent: a driver starting now maps all of it or none
    stamp.write_text(key)
    log_event(
        _log,
        "install.class_archive.done",
        megabytes=round(archive.stat().st_size / 2**20),
        seconds=round(time.monotonic() - started, 1),
    )
    return archive


SOURCE_DIRS = (
    *("core", "pipelines", "views", "derived", "ingest", "speed_layer", "batch_layer", "layout"),
    *("serving", "data_contracts", "platformctl", "dags", "bench", "tests"),
)


def compile_sources() -> None:
    """The project's modules compiled to bytecode beside them (only those changed since).

    Where ``PYTHONDONTWRITEBYTECODE`` is set, as on many CI machines and in containers,
    Python compiles every module without bytecode on every import: each test worker,
    speed job, step server, Spark Python worker and Airflow task process pays it again
    (importing Great Expectations and pyspark: 15.9 s without, 8.2 s with). Installed
    packages are compiled by ``uv pip sync --compile-bytecode``; this does the project's.
    """
    import compileall

    for name in SOURCE_DIRS:
        if (PROJECT_ROOT / name).is_dir():
            compileall.compile_dir(PROJECT_ROOT / name, quiet=1, workers=0)


def install(settings: Settings, *, airflow: bool = True, browser: bool = True) -> None:
    """Everything ``up``, the jobs and the tests need on this machine."""
    from serving.connect.guard import build_guard_jar

    compile_sources()
    for component in JAR_COMPONENTS:
        install_jars(settings, component)
    build_guard_jar(settings.local.state_dir)
    install_class_archive(settings)
    install_analyst_client(settings)
    install_prometheus()
    install_npm(settings)
    if browser:
        install_browser()
    if airflow:
        install_airflow(settings)
