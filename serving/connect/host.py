"""The SQL server: a Spark Connect endpoint over the serving views and silver's events.

``python -m serving.connect`` (the ``sql`` service of ``platformctl``) starts
one Spark driver with Spark's Connect plugin (the ``spark-connect`` jar ships
with pyspark), Delta, and the read-only guard (:mod:`serving.connect.guard`).
Analysts connect with nothing but ``pip install pyspark-client``::

    spark = SparkSession.builder.remote("sc://host:15002/;token=<your token>").getOrCreate()
    spark.sql("SHOW VIEWS").show()

The guard binds each call to the identity its token proves, shows it its teams' views
and audits its statements (:mod:`serving.connect.access`, :mod:`serving.connect.grants`).

Every ``sql.refresh_s`` this process, through its own (trusted) session,
rebuilds the catalog (:mod:`serving.connect.catalog`): it re-reads the batch
boundaries, snapshots the speed rows it lacks into a new Parquet folder, and,
when silver has a new version, adds its new user agents to the dimension and
re-creates ``events``; it lands the audit's new records (:mod:`.audit_table`). A view
always reads the current gold and silver (Delta resolves the latest version per query);
speed rows are at most ``refresh_s`` older than Cassandra's. ``GET /health`` and
``GET /metrics`` on ``sql.health_port`` (:mod:`serving.connect.health`) say whether it
answers and how old the catalog is.

Analysts are untrusted (docs/sql.md, "What an analyst can and cannot do"): the
guard refuses at the protocol (:data:`INTERCEPTOR_CLASS`), when a text is
parsed and when a plan is analysed; :func:`server_conf` sets the limits (time,
result size, nesting, a scheduler pool per session, clients that left) and
makes an out-of-memory error end the driver, so the supervisor restarts it
rather than leave a server that no longer answers. On this machine the
analysts' tasks run in executor JVMs of their own, below the driver's CPU
priority, and a cancelled task that goes on running ends its executor, not the
server (:mod:`serving.connect.executors`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.log import get_logger, log_event
from core.settings import Settings
from core.spark import fair_allocations
from pipelines import DERIVED, PIPELINES, DerivedSpec, PipelineSpec
from serving.connect import catalog
from serving.connect.audit_table import AUDIT_VIEW, AuditTable
from serving.connect.derived_views import derived_view_sql
from serving.connect.executors import executor_processes, prepare, task_conf
from serving.connect.guard import GUARD_CLASS, INTERCEPTOR_CLASS, LISTENER_CLASS, build_guard_jar
from serving.connect.parquet import write_parquet
from serving.connect.user_agents import refresh_user_agents
from views import ViewSpec

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from layout import SpeedProgress
    from serving.sql import SpeedRows

__all__ = ["ANALYST_POOLS", "PLATFORM_POOL", "SqlServer", "server_conf", "start_spark"]

_log = get_logger(__name__)
NO_PYTHON_WORKERS = Path(__file__).with_name("no-python-workers")
"""The server's ``PYSPARK_PYTHON``: a script that refuses, so no Python worker ever starts
(defence in depth behind the guard, which refuses Python UDFs when a plan is analysed)."""
GENERATION_GRACE_S = 600.0
"""How long a replaced speed snapshot stays on disk for queries still reading it."""
PLATFORM_POOL = "platform"
"""The scheduler pool of the server's own work (the catalog refresh); each analyst's Spark
Connect session runs in a pool of its own, and pools share the cores fairly."""
ANALYST_POOLS = 64
"""Scheduler pools of the analysts' sessions: ``ProtocolGuard.java`` hands them to sessions
in turn, so the last 64 sessions never share one; inside a pool jobs share fairly too, so two
sessions that do share one still do not wait for each other's jobs to end."""


def _pools() -> str:
    """The FAIR scheduler's allocation file: the default pool, the server's, the analysts'."""
    return fair_allocations(
        {"default": ("FAIR", 1, 0), PLATFORM_POOL: ("FIFO", 2, 1)}
        | {f"analysts-{n}": ("FAIR", 1, 0) for n in range(ANALYST_POOLS)}
    )


def server_conf(
    settings: Settings, guard_jar: Path, jars: tuple[str, ...], java_options: str = ""
) -> dict[str, str]:
    """The ``spark.*`` settings the SQL server adds to the platform's session settings."""
    sql = settings.sql
    detached_ms = int(sql.detached_timeout_s * 1000)
    return {
        "spark.plugins": "org.apache.spark.sql.connect.SparkConnectPlugin",
        "spark.connect.grpc.binding.address": sql.host,
        "spark.connect.grpc.binding.port": str(sql.port),
        # No spark.connect.authenticate.token: the guard identifies every call's credential.
        "spark.connect.grpc.interceptor.classes": INTERCEPTOR_CLASS,
        "spark.connect.grpc.marshallerRecursionLimit": str(sql.max_plan_depth),
        "spark.connect.grpc.maxInboundMessageSize": str(32 * 1024 * 1024),
        # Plans arrive as plain protobuf, so the interceptor reads what they ask for.
        "spark.connect.session.planCompression.threshold": "-1",
        # A stream ends after this and a live client reattaches; one whose client left is
        # then detached, and interrupted once detached this long.
        "spark.connect.execute.reattachable.senderMaxStreamDuration": f"{detached_ms}ms",
        "spark.connect.execute.manager.detachedTimeout": f"{detached_ms}ms",
        "spark.connect.execute.manager.maintenanceInterval": f"{max(1000, detached_ms // 3)}ms",
        "spark.sql.connect.serverStacktrace.enabled": "false",
        "spark.extraListeners": LISTENER_CLASS,
        "spark.sql.extensions": f"io.delta.sql.DeltaSparkSessionExtension,{GUARD_CLASS}",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(_root(settings) / "warehouse"),
        # ${...} in SQL text would read settings, system properties and environment variables.
        "spark.sql.variable.substitute": "false",
        "spark.jars": ",".join((*jars, str(guard_jar))),
        "spark.local.dir": str(_root(settings) / "local"),
        "spark.driver.maxResultSize": sql.max_result_size,
        "spark.driver.extraJavaOptions": f"{java_options} -XX:+ExitOnOutOfMemoryError".strip(),
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(_root(settings) / "fairscheduler.xml"),
        "spark.platform.sql.settable": ",".join(sql.settable),
        "spark.platform.sql.maxStatementChars": str(sql.max_statement_chars),
        "spark.platform.sql.maxStatementDepth": str(sql.max_statement_depth),
        "spark.platform.sql.timeLimitSeconds": str(sql.time_limit_s),
        "spark.platform.sql.maxValueBytes": str(sql.max_value_bytes),
        "spark.platform.sql.maxPartitions": str(sql.max_partitions),
        "spark.platform.sql.maxStatements": str(settings.access.max_statements),
        # The server's own pandas -> Spark rows go through Arrow, never a Python worker.
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        **task_conf(sql),
    }


def _root(settings: Settings) -> Path:
    return settings.local.state_dir / "sql"


def start_spark(settings: Settings) -> SparkSession:
    """The server's Spark driver, Connect endpoint listening, its own session trusted, the
    statements' time limit running."""
    from core.spark import build_spark_session, local_spark_jars, spark_conf

    guard = build_guard_jar(settings.local.state_dir)
    jars = settings.spark.jars or local_spark_jars(settings.local.state_dir)
    os.environ["PYSPARK_PYTHON"] = str(NO_PYTHON_WORKERS)
    root = _root(settings)
    (root / "local").mkdir(parents=True, exist_ok=True)
    (root / "fairscheduler.xml").write_text(_pools())
    options = spark_conf(settings.spark, app_name="-").get("spark.driver.extraJavaOptions", "")
    executors = prepare(settings, root, (*jars, str(guard)))
    spark_settings = settings.spark.model_copy(
        update={
            "master": executors.pop("spark.master", settings.spark.master),
            "driver_memory": settings.sql.driver_memory,
            "extra_conf": {
                **settings.spark.extra_conf,
                **server_conf(settings, guard, jars, options),
                **executors,
            },
        }
    )
    spark = build_spark_session(
        settings.model_copy(update={"spark": spark_settings}), app_name="platform-sql"
    )
    jvm = spark._jvm  # type: ignore[attr-defined]
    # Analysts' Connect sessions are cut from Spark's default session: this one, whose catalog
    # the refresh builds. Until trust() below, the guard answers their calls UNAVAILABLE.
    getattr(jvm, "org.apache.spark.sql.classic.SparkSession").setDefaultSession(
        spark._jsparkSession  # type: ignore[attr-defined]
    )
    jvm.platform.sql.ReadOnlyGuard.trust(spark._jsparkSession)  # type: ignore[attr-defined]
    jvm.platform.sql.StatementWatchdog.start()
    return spark


class SqlServer:
    """The catalog refresh loop and its health figures."""

    def __init__(
        self,
        settings: Settings,
        spark: SparkSession,
        pipelines: Sequence[PipelineSpec] = PIPELINES,
        derived: Sequence[DerivedSpec] = DERIVED,
    ) -> None:
        """The catalog of ``pipelines`` and ``derived`` (every declared one) on ``spark``."""
        self.settings = settings
        self.spark = spark
        self.pipelines = tuple(pipelines)
        self.derived = tuple(derived)
        self.failures: dict[str, dict[str, str]] = {}
        """Per pipeline, the parts (views, ``events``) the last refresh could not make, with
        their errors: they keep their last definition, the rest of the catalog is current."""
        self.started = time.time()
        self.refreshed: float | None = None
        self.refresh_seconds: float | None = None
        self.error: str | None = None
        self.silver_versions: dict[str, int] = {}
        """Per pipeline, the silver version its events view was made from."""
        self._silver_commits: dict[str, tuple[int, int]] = {}
        """The same, with its commit file's time (a table deleted and written again)."""
        self.views: list[str] = []
        self._made: dict[str, str] = {}
        """Per view name, the statement that made it: a view's text names its sources, which
        Spark resolves at each query, so the same text is not made again (analysing it
        loaded gold's Delta log: half the work of a refresh in which nothing changed)."""
        self._speed: dict[str, str] = {}
        self.speed_rows: dict[str, SpeedRows] = {}
        """Per view, its speed rows across refreshes (and how many refreshes read them)."""
        self._retired: list[tuple[float, Path]] = []
        self.audit = AuditTable(settings, _root(settings))
        self.access: Any = None  # its SqlAccess (serving.connect.access), for /health
        self._cluster: Any = None
        self._session: Any = None
        driver = getattr(spark.sparkContext._gateway, "proc", None)  # type: ignore[attr-defined]
        self.driver_pid: int | None = None if driver is None else driver.pid

    def cassandra(self) -> Any:
        """The server's Cassandra session, opened once (no schema metadata: a refresh reads
        pointers and view rows, never the schema of every keyspace)."""
        if self._session is None:
            from core.cassandra import connect

            self._cluster, self._session = connect(self.settings.cassandra, schema=False)
        return self._session

    def close(self) -> None:
        """Close the Cassandra session (the Spark session is the caller's)."""
        if self._cluster is not None:
            self._cluster.shutdown()
        self._cluster = self._session = None
        self.audit.close()

    # --- the catalog --------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read boundaries, speed rows and silver; re-create the views that changed.

        Each pipeline, and each view of it, is its own failure domain: a view that cannot be
        made (a measure its gold table does not have yet, a damaged table) keeps its last
        definition, is named in :attr:`failures` (``/health``, ``wap_sql_catalog_failures``)
        and is tried again at the next refresh, while every other view is made as usual."""
        from layout import read_boundaries, read_speed_progress, read_speed_versions
        from serving.timerange import to_ms

        began = time.monotonic()
        views = [spec for pipeline in self.pipelines for spec in pipeline.view_specs]
        names = [spec.name for spec in views]
        session, keyspace = self.cassandra(), self.settings.cassandra.keyspace
        published = read_boundaries(self.settings.cassandra, names, session=session)
        boundaries = {name: to_ms(b.at) if b else None for name, b in published.items()}
        # Read before the speed rows: a minute closed by its watermark is final in them, and
        # the same progress and version next time mean no row was written in between.
        streamed = read_speed_progress(session, keyspace, names)  # views with speed rows
        versions = read_speed_versions(session, keyspace, names)
        now = int(time.time() * 1000)
        failures: dict[str, dict[str, str]] = {}
        for pipeline in self.pipelines:
            for spec in pipeline.view_specs:
                progress = streamed.get(spec.name)
                mark = None if progress is None else (progress, versions[spec.name])
                with self._domain(failures, pipeline.name, spec.name):
                    self._gold(spec)
                    self._speed_snapshot(spec, boundaries[spec.name], now, mark)
                    statement = catalog.serving_sql(spec, boundaries[spec.name])
                    self._make(f"serving_{spec.name}", statement)
        self.spark.sql(catalog.boundaries_sql(boundaries, now))
        for pipeline in self.pipelines:
            with self._domain(failures, pipeline.name, "events"):
                self._events(pipeline)
        for derived in self.derived:  # each on its table, as its contract shows it
            with self._domain(failures, derived.name, "table"):
                self._make(derived.name, derived_view_sql(self.spark, self.settings, derived))
        with self._domain(failures, "_platform", "audit"):
            self._audit()
        self._drop_retired()
        self.views = sorted(row["viewName"] for row in self.spark.sql("SHOW VIEWS").collect())
        self.refreshed, self.refresh_seconds = time.time(), time.monotonic() - began
        self.failures, self.error = failures, None

    @contextlib.contextmanager
    def _domain(self, failures: dict[str, dict[str, str]], pipeline: str, part: str) -> Any:
        """Run the block for ``pipeline``'s ``part`` (a view, or ``events``); a failure is
        recorded in ``failures`` and logged, and the refresh goes on with the next part."""
        try:
            yield
        except Exception as error:  # this part keeps its last definition; reported
            text = f"{type(error).__name__}: {error}"[:2000]
            failures.setdefault(pipeline, {})[part] = text
            if self.failures.get(pipeline, {}).get(part) != text:  # once, not every refresh
                log_event(
                    _log, "sql.view_failed", level=40, pipeline=pipeline, part=part, error=text
                )

    def _make(self, name: str, statement: str) -> None:
        """``statement`` (``CREATE OR REPLACE VIEW name ...``) unless it made ``name`` last."""
        if self._made.get(name) != statement:
            self.spark.sql(statement)
            self._made[name] = statement

    def _audit(self) -> None:
        """The audit topic's new records landed (no Spark job when there is none), old rows
        deleted once a day, and ``audit_log`` on the table."""
        self.audit.ensure(self.spark)
        self.audit.land(self.spark)
        self.audit.maintain(self.spark)
        self._make(AUDIT_VIEW, self.audit.view_sql())

    def _gold(self, spec: ViewSpec) -> None:
        """``gold_<view>`` on the gold table (every query reads its current version), or
        empty until the table is written. Whether it is, from a listing of its log, not
        ``DeltaTable.isDeltaTable``: that trusts the log this JVM cached, and a log first seen
        before its first commit (a new pipeline's gold) stayed "no table" there for minutes."""
        from layout.lake import gold_path, table_version
        from serving.sql import view_schema

        name, path = f"gold_{spec.name}", gold_path(self.settings, spec)
        on_table = catalog.path_view_sql(name, "delta", path, spec.columns)
        if self._made.get(name) == on_table:
            return
        if table_version(self.spark, path) is not None:
            self._make(name, on_table)
        else:
            self._make(name, catalog.empty_view_sql(name, view_schema(spec)))

    def _speed_snapshot(
        self,
        spec: ViewSpec,
        boundary: int | None,
        now: int,
        mark: tuple[SpeedProgress, int] | None,
    ) -> None:
        """A new Parquet folder of the speed rows when they changed, and ``speed_<view>`` on it.

        ``mark`` is the view's speed progress and speed version, read before the rows (None:
        no speed layer ever streamed it: no rows, and no read). The rows are read only when
        it changed, and then only the minutes the watermark had not closed
        (:class:`serving.sql.SpeedRows`): from the boundary, never before the speed rows'
        lifetime (three days of minute partitions per view)."""
        from functools import partial

        from serving.sql import SpeedRows, first_speed_window, read_speed_rows
        from serving.timerange import MINUTE_MS, to_ms

        lo = first_speed_window(boundary, now, self.settings.speed.ttl_s)
        rows: list = []
        speed: SpeedRows | None = None
        if mark is not None:
            speed = self.speed_rows.setdefault(spec.name, SpeedRows())
            read = partial(read_speed_rows, self.settings, spec, session=self.cassandra())
            tolerance = self.settings.event_time.future_tolerance_s
            ahead = int(min(tolerance, self.settings.speed.ttl_s) * 1000) + MINUTE_MS
            rows = speed.rows(read, mark, to_ms(mark[0].watermark), lo, now + MINUTE_MS, ahead)
            if not speed.changed and spec.name in self._speed:
                return
        digest = hashlib.sha256(repr(sorted(rows, key=repr)).encode()).hexdigest()
        if not self._speed.get(spec.name, "").endswith(digest):
            self._new_snapshot(spec, rows, digest)
        if speed is not None:
            speed.shown()

    def _new_snapshot(self, spec: ViewSpec, rows: list, digest: str) -> None:
        """``rows`` in a new Parquet folder, ``speed_<view>`` on it, the old folder retired."""
        from serving.sql import view_schema

        folder = _root(self.settings) / "speed" / spec.name / f"g{time.time_ns()}"
        write_parquet(rows, view_schema(spec), folder / "part-0.parquet")
        name = f"speed_{spec.name}"
        self._make(name, catalog.path_view_sql(name, "parquet", str(folder), spec.columns))
        previous = self._speed.get(spec.name)
        if previous:
            self._retired.append((time.time(), Path(previous.rsplit("#", 1)[0])))
        self._speed[spec.name] = f"{folder}#{digest}"
        log_event(_log, "sql.speed.snapshot", view=spec.name, rows=len(rows), folder=str(folder))

    def _events(self, pipeline: PipelineSpec) -> None:
        """A pipeline's events when its silver has a new version (none before silver): for the
        collector's default pipeline ``events_all`` and ``events`` (with the request's
        dimensions), for any other ``<pipeline>_events``."""
        from data_contracts import load_contract
        from data_contracts.derive.privacy import sql_view
        from layout.lake import silver_path, table_version, user_agents_path

        silver = silver_path(self.settings, pipeline.topic_of(self.settings))
        # A listing of the table's log (``DESCRIBE HISTORY`` was a Spark job of 0.15-0.3 s
        # per pipeline at every refresh, on the cores serving answers from).
        newest = table_version(self.spark, silver)
        if newest is None or newest == self._silver_commits.get(pipeline.name):
            return
        stored = self.spark.read.format("delta").load(silver)
        exposed = sql_view(stored, load_contract(pipeline.contract, pipeline.contract_major))
        added = None
        if catalog.events_views(pipeline) == catalog.DEFAULT_EVENTS:
            dims = user_agents_path(self.settings)
            added = refresh_user_agents(self.spark, silver, dims)
            statements = catalog.events_sql(stored.schema, exposed.schema, silver, dims)
        else:
            statements = (
                catalog.pipeline_events_sql(pipeline.name, stored.schema, exposed.schema, silver),
            )
        for statement in statements:
            self.spark.sql(statement)
        self._silver_commits[pipeline.name] = newest
        self.silver_versions[pipeline.name] = newest[0]
        log_event(
            _log,
            "sql.events.refreshed",
            pipeline=pipeline.name,
            silver_version=newest[0],
            user_agents_added=added,
        )

    def _drop_retired(self) -> None:
        keep = []
        for retired_at, folder in self._retired:
            if time.time() - retired_at > GENERATION_GRACE_S:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                keep.append((retired_at, folder))
        self._retired = keep

    def run(self, stop: threading.Event) -> None:
        """Refresh every ``sql.refresh_s`` until ``stop``; a failed refresh keeps the old views."""
        self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", PLATFORM_POOL)
        try:
            while not stop.is_set():
                try:
                    self.refresh()
                    log_event(_log, "sql.refreshed", seconds=round(self.refresh_seconds or 0, 2))
                except Exception as error:  # reported by /health, retried
                    self.error = f"{type(error).__name__}: {error}"[:2000]
                    log_event(_log, "sql.refresh_failed", level=40, error=self.error)
                stop.wait(self.settings.sql.refresh_s)
        finally:
            self.close()

    # --- health -------------------------------------------------------------------------------

    def processes(self) -> dict[str, Any]:
        """This process's pid, its driver JVM's, and the executor JVMs the driver started."""
        executors = [] if self.driver_pid is None else executor_processes(self.driver_pid)
        return {"server": os.getpid(), "driver": self.driver_pid, "executors": executors}

    def catalog_state(self) -> tuple[bool, dict[str, Any]]:
        """(built, figures) of the catalog, from what the refresh recorded (no Spark call):
        ``degraded`` when refreshes fail or it is older than three refresh periods."""
        age = None if self.refreshed is None else round(time.time() - self.refreshed, 1)
        body: dict[str, Any] = {
            "status": "starting",
            "url": self.settings.sql.url().split("/;", 1)[0],
            "uptime_s": round(time.time() - self.started, 1),
            "catalog_age_s": age,
            "refresh_s": self.refresh_seconds and round(self.refresh_seconds, 2),
            "silver_versions": dict(self.silver_versions),
            # Per view, refreshes that read speed rows and those that kept the last ones.
            "speed_reads": {name: [r.reads, r.kept] for name, r in dict(self.speed_rows).items()},
            "error": self.error,
            # Per pipeline, what the last refresh could not make (the rest serves).
            "failing": {name: dict(parts) for name, parts in dict(self.failures).items()},
            "processes": self.processes(),
            "audit_landed": self.audit.landed,
        }
        if self.access is not None:
            body["access"] = self.access.figures()
        if age is None:
            return False, body
        stale = age > 3 * self.settings.sql.refresh_s + (self.refresh_seconds or 0)
        body["status"] = "degraded" if stale or self.error or self.failures else "ok"
        body["views"] = self.views
        return True, body
