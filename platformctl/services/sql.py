"""The SQL server (``python -m serving.connect``) as a local service.

A Spark driver with the Spark Connect endpoint (``sql.port``) analysts'
tools connect to, and ``/health`` and ``/metrics`` on ``sql.health_port``
(docs/sql.md). It runs supervised (``--supervise``): a server that exits
(an out-of-memory error ends its driver) or stops answering (``/health``
runs ``SELECT 1`` over Spark Connect with a time limit) is restarted by its
supervisor, which is the process ``up`` starts and ``down`` stops.

Before it starts, it registers ``/metrics`` with the local Prometheus:
``<state>/prometheus/targets/sql.json``, the file the ``sql`` job of
``infra/local/prometheus/prometheus.yml.tmpl`` discovers its target from
(Prometheus resolves it beside its config and watches it).
"""

from __future__ import annotations

import json
from pathlib import Path

from core.settings import Settings
from core.view_settings import ViewSettings
from platformctl.process import ManagedProcess
from platformctl.services.base import Service, http_health, python_process

__all__ = ["SERVICE", "healthy", "install", "process", "register_target", "without_identity_key"]


def process(settings: Settings) -> ManagedProcess:
    """The SQL server's supervisor; it runs the server (Spark Connect and the catalog refresh)
    and restarts it when it exits or stops answering. Its settings leave out the key of the
    views' digests (``views.identity_key``, the local default in its place): it only reads
    the sketches the layers built, and analysts' statements run in its driver."""
    return python_process(
        without_identity_key(settings),
        "sql",
        ["serving.connect", "--supervise"],
        ports=(settings.sql.port, settings.sql.health_port),
    )


def without_identity_key(settings: Settings) -> Settings:
    """``settings`` with the local default in place of ``views.identity_key``.

    >>> from core.view_settings import LOCAL_IDENTITY_KEY
    >>> mine = Settings(views={"identity_key": "k" * 32})
    >>> without_identity_key(mine).views.identity_key.get_secret_value() == LOCAL_IDENTITY_KEY
    True
    """
    return settings.model_copy(update={"views": ViewSettings()})


def install(settings: Settings) -> None:
    """Compile the guard into its jar (a no-op when it is up to date)."""
    from serving.connect.guard import build_guard_jar

    build_guard_jar(settings.local.state_dir)


def register_target(settings: Settings) -> Path:
    """Write the SQL server's scrape target for the local Prometheus (file-based discovery);
    the file's path."""
    host = "127.0.0.1" if settings.sql.host == "0.0.0.0" else settings.sql.host
    target = settings.local.state_dir / "prometheus" / "targets" / "sql.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps([{"targets": [f"{host}:{settings.sql.health_port}"]}]))
    return target


def healthy(settings: Settings) -> tuple[bool, str]:
    """Probe: ``/health`` answers 200 (the catalog was built and ``SELECT 1`` answered in
    time); detail = URL, catalog age, or why not (its supervisor restarts a server that stops
    answering)."""
    answer, why_not = http_health(settings.sql.host, settings.sql.health_port)
    if answer is None:
        return False, f"{why_not} (its supervisor restarts it; `platformctl logs sql`)"
    body = answer.json()
    if answer.status_code != 200:
        if body.get("status") == "not_answering":
            return False, f"NOT ANSWERING: {body.get('error')}; its supervisor restarts it"
        return False, f"{body.get('status')}: {body.get('error') or 'building the catalog'}"
    state = "" if body["status"] == "ok" else f"DEGRADED ({body.get('error') or 'stale'}) "
    return True, (
        f"{state}{body['url']} (token: WAP_SQL__TOKEN); catalog {body['catalog_age_s']}s old, "
        f"{len(body.get('views', []))} views, silver versions {body.get('silver_versions')}, "
        f"SELECT 1 in {body.get('health_query_s')}s{_processes(body.get('processes'))}"
    )


def _processes(processes: dict | None) -> str:
    """The server's processes, as ``/health`` lists them: its driver JVM and executor JVMs.

    >>> _processes({"server": 1, "driver": 2, "executors": [{"pid": 3, "rss_mb": 300, "nice": 10}]})
    '; driver pid 2, executors 3 (300 MB, tasks at nice 10)'
    """
    if not processes:
        return ""
    executors = ", ".join(
        f"{e['pid']} ({e['rss_mb']} MB, tasks at nice {e['nice']})"
        if e.get("nice") is not None
        else f"{e['pid']} ({e['rss_mb']} MB)"
        for e in processes.get("executors", [])
    )
    return f"; driver pid {processes.get('driver')}, executors {executors or 'none'}"


SERVICE = Service(
    name="sql",
    process=process,
    probe=healthy,
    requires=("cassandra",),
    install=install,
    prepare=register_target,
)
