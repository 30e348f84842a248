"""Install what the local platform needs, only when it is missing or out of date.

JVM parts come from Maven Central through the small Maven projects in
``infra/local/maven/<component>``; Airflow gets its own virtualenv. A stamp
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
from platformctl.airflow_env import ensure_airflow_venv

__all__ = [
    "CHROMIUM",
    "JAR_COMPONENTS",
    "install",
    "install_airflow",
    "install_browser",
    "install_jars",
    "jars_dir",
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


def install_airflow(settings: Settings) -> Path:
    """Airflow's venv from ``requirements/airflow.lock`` (a no-op when up to date); its python."""
    return ensure_airflow_venv(
        settings.airflow.venv, PROJECT_ROOT / "requirements" / "airflow.lock", PROJECT_ROOT
    )


def install(settings: Settings, *, airflow: bool = True, browser: bool = True) -> None:
    """Everything ``up``, the jobs and the tests need on this machine."""
    for component in JAR_COMPONENTS:
        install_jars(settings, component)
    if browser:
        install_browser()
    if airflow:
        install_airflow(settings)
