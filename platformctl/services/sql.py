"""The SQL server (``python -m serving.connect``) as a local service.

A Spark driver with the Spark Connect endpoint (``sql.port``) analysts'
tools connect to, and ``/health`` on ``sql.health_port`` (docs/sql.md).
"""

from __future__ import annotations

from core.settings import Settings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, http_health, python_process

__all__ = ["SERVICE", "healthy", "install", "process"]


def process(settings: Settings) -> ManagedProcess:
    """The SQL server: its Spark driver serves Spark Connect and its catalog refresh."""
    return python_process(
        settings, "sql", ["serving.connect"], ports=(settings.sql.port, settings.sql.health_port)
    )


def install(settings: Settings) -> None:
    """Compile the read-only guard into its jar (a no-op when it is up to date)."""
    from serving.connect.guard import build_guard_jar

    build_guard_jar(settings.local.state_dir)


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: ``/health`` answers 200 (the catalog was built); detail = URL, catalog age."""
    answer, why_not = http_health(settings.sql.host, settings.sql.health_port)
    if answer is None:
        return False, why_not
    body = answer.json()
    if answer.status_code != 200:
        return False, f"{body.get('status')}: {body.get('error') or 'building the catalog'}"
    state = "" if body["status"] == "ok" else f"DEGRADED ({body.get('error') or 'stale'}) "
    return True, (
        f"{state}{body['url']} (token: WAP_SQL__TOKEN); catalog {body['catalog_age_s']}s old, "
        f"{len(body.get('views', []))} views, silver version {body['silver_version']}"
    )


SERVICE = Service(
    name="sql", process=process, probe=healthy, requires=("cassandra",), install=install
)
