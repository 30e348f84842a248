"""Serving against the real Cassandra: a keyspace per test module, rows written as each layer
writes them, and the API served over real HTTP by uvicorn on a free port.

Batch rows are *published* here the way the batch layer's protocol says (rows under a new
version in both batch tables, then ``batch_days``, then ``batch_boundary``), so these tests
do not depend on the batch layer's own code; speed rows go through the speed layer's sink.

The SQL server's tests share the session's published lake (``published_lake``,
:mod:`tests.support.lake`), the analyst's virtualenv (``client_python``:
``pyspark-client``, DuckDB, a notebook kernel, nothing of this repository), and start the
server as a process of its own (``start_sql_server``).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from core.settings import ServingSettings, Settings, child_env
from tests.support.ports import free_port
from tests.support.serving import served
from tests.support.sql import SERVICE_TOKENS

TOKEN = SERVICE_TOKENS["tester"]


@pytest.fixture(scope="module")
def serving_settings(local_platform: Settings, laid_out_keyspaces, request) -> Iterator[Settings]:
    """Settings of this module: a keyspace of its own with every speed and batch table.

    A module whose known rows lie further back than the speed TTL sets ``SPEED_TTL_S``:
    its speed tables keep rows that long and serving is told so. ``SERVING`` (a dict)
    overrides serving settings (the defaults here re-read pointers on every request).
    """
    ttl_s = getattr(request.module, "SPEED_TTL_S", local_platform.speed.ttl_s)
    settings = local_platform.model_copy(
        update={
            "speed": local_platform.speed.model_copy(update={"ttl_s": ttl_s}),
            "serving": ServingSettings(
                **local_platform.serving.model_dump()
                | {
                    "port": free_port(),
                    "api_tokens": {"tester": TOKEN},
                    "pointer_cache_s": 0.0,
                    "workers": 1,
                }
                | getattr(request.module, "SERVING", {})
            ),
        }
    )
    with laid_out_keyspaces.lend(settings) as settings:
        yield settings


@pytest.fixture(scope="module")
def cql(serving_settings: Settings):
    from core.cassandra import connect

    cluster, session = connect(serving_settings.cassandra)
    yield session
    cluster.shutdown()


def _ts(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@pytest.fixture(scope="module")
def publish(serving_settings: Settings, cql) -> Callable[..., int]:
    """``publish(view, rows, boundary, days=None, version=None, rollups=True)``: the batch
    publish protocol.

    ``rows``: dicts with ``window_start``, the keys and the measures. Writes them
    under a new version, with their hour and day rollups (``rollups=False``: minutes
    only, as an older release published), points ``batch_days`` of ``days`` (default:
    the rows' days) at it, then moves ``batch_boundary`` (``None`` leaves it alone).
    Returns the version.
    """
    from layout import GRAINS, PointerTables, ViewTables
    from serving.merge import rollup_rows
    from views import view as view_spec

    keyspace = serving_settings.cassandra.keyspace
    set_day = cql.prepare(PointerTables(keyspace).insert_day)
    set_boundary = cql.prepare(PointerTables(keyspace).insert_boundary)

    def write(tables, rows: Sequence[Mapping[str, Any]], version: int) -> None:
        from cassandra.concurrent import execute_concurrent_with_args

        spec = tables.spec
        measures = [m.name for m in spec.measures]
        by_key, by_minute = [], []
        for row in rows:
            start = _ts(row["window_start"])
            keys = [row[k] for k in spec.keys]
            key_row, minute_row = tables.bind(
                start, keys, [row[m] for m in measures], version=version
            )
            by_key.append(key_row)
            by_minute.append(minute_row)
        for text, args in (
            (tables.insert_by_key(), by_key),
            (tables.insert_by_minute(), by_minute),
        ):
            for ok, result in execute_concurrent_with_args(cql, cql.prepare(text), args):
                assert ok, result

    def run(
        view: str,
        rows: Sequence[Mapping[str, Any]],
        boundary: datetime | None,
        days: Sequence[date] | None = None,
        version: int | None = None,
        rollups: bool = True,
    ) -> int:
        spec = view_spec(view)
        version = version or time.time_ns() // 1000
        rows = [{**row, "window_start": _ts(row["window_start"])} for row in rows]
        for grain in GRAINS if rollups else ("minute",):
            tables = ViewTables(spec, keyspace, "batch", grain=grain)
            write(tables, rows if grain == "minute" else rollup_rows(spec, rows, grain), version)
        now = datetime.now(UTC)
        counts = Counter(row["window_start"].date() for row in rows)
        for day in days if days is not None else sorted(counts):
            cql.execute(set_day, (view, day, version, counts.get(day, 0), now, rollups))
        if boundary is not None:
            cql.execute(set_boundary, (view, boundary, version, "test", now))
        return version

    return run


@pytest.fixture(scope="module")
def write_speed(serving_settings: Settings) -> Callable[..., None]:
    """``write_speed(view, rows)``: upsert rows through the speed layer's own sink."""
    from layout import ViewTables
    from speed_layer.sink import write_rows
    from views import view as view_spec

    def run(view: str, rows: Sequence[Mapping[str, Any]], batch_id: int = 1) -> None:
        tables = ViewTables(view_spec(view), serving_settings.cassandra.keyspace, "speed")
        fixed = [{**row, "window_start": _ts(row["window_start"])} for row in rows]
        write_rows(fixed, tables, serving_settings.cassandra, batch_id)

    return run


@pytest.fixture(scope="module")
def serving_url(serving_settings: Settings) -> Iterator[str]:
    """The serving app on real HTTP (uvicorn in a thread) for this module's keyspace."""
    with served(serving_settings) as url:
        yield url


@pytest.fixture(scope="session")
def api_token() -> str:
    """The analyst token the serving app of these tests accepts."""
    return TOKEN


@pytest.fixture(scope="module")
def api(serving_url: str) -> Iterator[httpx.Client]:
    """An HTTP client of the serving app carrying the analyst token."""
    with httpx.Client(
        base_url=serving_url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture(scope="session")
def client_python(settings) -> Path:
    """The analyst's virtualenv: ``requirements/analyst.lock`` from PyPI (``pyspark-client``,
    DuckDB and its Delta extension, a notebook kernel), nothing of this repository; built
    once by ``make install`` (a no-op here when it is up to date)."""
    from platformctl.install import install_analyst_client

    return install_analyst_client(settings)


_PROJECT_ROOT = Path(__file__).resolve().parents[3]


@dataclass
class SqlServerProcess:
    """``python -m serving.connect`` (``--supervise``: its supervisor) on some settings."""

    settings: Settings
    process: subprocess.Popen
    log: Path

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.settings.sql.health_port}"

    def health(self) -> dict[str, Any]:
        return httpx.get(f"{self.health_url}/health", timeout=30).json()

    def wait_ready(self, timeout_s: float = 600) -> dict[str, Any]:
        """Wait until the catalog is built over silver and ``SELECT 1`` answers."""
        deadline = time.monotonic() + timeout_s
        while True:
            assert self.process.poll() is None, self.log.read_text()[-5000:]
            assert time.monotonic() < deadline, self.log.read_text()[-5000:]
            try:
                body = self.health()
                if "web_events" in body.get("silver_versions", {}) and body["status"] == "ok":
                    return body
            except httpx.HTTPError:
                pass
            time.sleep(1)

    def answering_after(self, replaced: int) -> bool:
        """Whether the supervisor runs a server other than ``replaced`` (a pid) and its
        ``/health`` says it answers."""
        from tests.support.processes import children

        if not [pid for pid in children(self.process.pid) if pid != replaced]:
            return False
        try:
            health = self.health()
        except httpx.HTTPError:
            return False
        return health.get("status") == "ok" and bool(health.get("answering"))

    def _drop_audit_topic(self) -> None:
        """Its audit topic (its own: :func:`tests.support.sql.sql_settings`) deleted."""
        from confluent_kafka.admin import AdminClient

        if self.settings.kafka.audit_topic.startswith("t-published-"):
            AdminClient(self.settings.kafka.client_config()).delete_topics(
                [self.settings.kafka.audit_topic]
            )

    def stop(self) -> None:
        """SIGTERM, as ``platformctl down`` stops it: the server must exit by itself (a
        Connect client's exit hook once held it for minutes after its Spark had stopped)."""
        self.process.terminate()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
            raise AssertionError(
                f"the SQL server did not exit within 60 s of SIGTERM:\n"
                f"{self.log.read_text()[-3000:]}"
            ) from None
        finally:
            self._drop_audit_topic()


@pytest.fixture(scope="session")
def oidc_provider():
    """An identity provider on this machine (its JWKS, and the tokens its key signs)."""
    from tests.support.identity_provider import identity_provider

    with identity_provider() as provider:
        yield provider


@pytest.fixture(scope="session")
def sql_server(
    published_lake, start_sql_server, oidc_provider, tmp_path_factory
) -> Iterator[SqlServerProcess]:
    """The SQL server over the published lake, under its supervisor, its catalog built: one
    for the session (:func:`tests.support.sql.sql_settings`), trusting ``oidc_provider``'s
    tokens too; a module's ``serving_settings`` is its settings with the module's serving
    app."""
    from core.settings import AccessSettings
    from tests.support.sql import sql_settings

    settings = sql_settings(published_lake.settings, tmp_path_factory.mktemp("sql") / "state")
    access = AccessSettings(**settings.access.model_dump() | oidc_provider.access())
    settings = settings.model_copy(update={"access": access})
    server = start_sql_server(settings, supervise=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def start_sql_server() -> Callable[..., SqlServerProcess]:
    """``start_sql_server(settings, supervise=False)``: the SQL server as a process of its
    own (its log in its state folder), once its catalog is built; stop it with ``.stop()``."""

    def start(settings: Settings, supervise: bool = False) -> SqlServerProcess:
        from confluent_kafka.admin import AdminClient

        from ingest.topics import audit_topic, ensure_topics

        state = settings.local.state_dir
        state.mkdir(parents=True, exist_ok=True)
        # Its audit records' topic (of its own, tests.support.sql.sql_settings).
        ensure_topics(
            AdminClient(settings.kafka.client_config()),
            [audit_topic(settings.kafka, settings.access.audit_retention_days)],
        )
        log = state / "sql.log"
        env = child_env(settings)
        argv = [sys.executable, "-m", "serving.connect", *(["--supervise"] if supervise else [])]
        with log.open("w") as out:
            process = subprocess.Popen(argv, cwd=_PROJECT_ROOT, env=env, stdout=out, stderr=out)
        server = SqlServerProcess(settings, process, log)
        try:
            server.wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    return start
