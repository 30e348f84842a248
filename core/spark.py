"""The one SparkSession builder every job and test uses.

It sets, in one place: Delta's SQL extension and catalog, the connector jars
(Delta, Kafka) through ``spark.jars`` (never Ivy resolution at start-up), the
RocksDB state store for streaming, small shuffles for one machine and the UI
switch. Cluster settings (master, extra ``spark.*`` keys, jar locations) come
from :class:`core.settings.SparkSettings`.

>>> from core.settings import SparkSettings
>>> conf = spark_conf(SparkSettings(jars=("/opt/jars/delta.jar",)), app_name="doc")
>>> conf["spark.sql.extensions"]
'io.delta.sql.DeltaSparkSessionExtension'
>>> conf["spark.jars"]
'/opt/jars/delta.jar'
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from core.settings import PROJECT_ROOT, LineageSettings, Settings, SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "AUTH_SECRET_ENV",
    "C1_ONLY",
    "build_spark_session",
    "class_archive_options",
    "lineage_conf",
    "local_class_archive",
    "local_spark_jars",
    "spark_conf",
]

LOCAL_LOG4J2 = PROJECT_ROOT / "infra" / "local" / "spark" / "log4j2.properties"
"""The local Spark JVMs' logging; not in the wheel: an installed copy (the services' image,
a cluster's nodes) keeps Spark's own default configuration."""
AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"
"""Where Spark's processes read a standalone cluster's shared secret (``spark.authenticate``)."""
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def local_spark_jars(state_dir: Path) -> tuple[str, ...]:
    """The connector jars that ``platformctl install`` copied from Maven Central."""
    jars_dir = state_dir / "jars" / "spark"
    jars = tuple(sorted(str(path) for path in jars_dir.glob("*.jar")))
    if not jars:
        raise FileNotFoundError(
            f"No Spark connector jars in {jars_dir}. Run `make install` "
            "(or `python -m platformctl install`) to fetch them from Maven Central, "
            "or set WAP_SPARK__JARS to the jars your cluster provides."
        )
    return jars


C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
"""JVM options for a JVM that lives minutes: the quick JIT compiler (C1) only, whose code is
cheaper to make than C2's for a JVM that does not live long enough to win it back.
``TieredStopAtLevel=1`` alone also shrinks the code cache to 48 MB (the size for a JVM
without the tiered compilers): a step server that ran bronze, silver and their gate filled
it within a minute, the JVM stopped compiling, and then failed every task with
``VirtualMachineError: Out of space in CodeCache for adapters``, which ends a Spark driver.
240 MB is the cache a tiered JVM gets; it is reserved, and only what is used is taken."""


def local_class_archive(state_dir: Path) -> Path:
    """The local Spark driver's class archive (``platformctl install`` writes it)."""
    return state_dir / "spark" / "classes.jsa"


def class_archive_options(archive: Path) -> str:
    """JVM options that map ``archive`` (a dynamic CDS archive of the classes a Spark driver
    loads): classes come parsed and verified from a file all drivers share, instead of
    from the jars. bench/spark_start.py: a session and its first work 22.3 s -> 18.7 s,
    37.6 -> 31.9 CPU seconds.
    An archive that does not match the JVM or class path is skipped, quietly (``-Xlog``).

    >>> class_archive_options(Path("/s/classes.jsa"))
    '-XX:SharedArchiveFile=/s/classes.jsa -Xlog:cds=off -Xlog:cds+dynamic=off'
    """
    return f"-XX:SharedArchiveFile={archive} -Xlog:cds=off -Xlog:cds+dynamic=off"


def _log4j_option() -> str:
    """``-Dlog4j2.configurationFile`` of :data:`LOCAL_LOG4J2`, where the file is."""
    return f"-Dlog4j2.configurationFile={LOCAL_LOG4J2.as_uri()}" if LOCAL_LOG4J2.exists() else ""


def _on_this_machine(spark: SparkSettings) -> bool:
    """Local mode, or the standalone cluster ``platformctl`` runs on this machine: the
    driver stays on loopback and Spark's cluster-sized defaults are cut to its cores."""
    return spark.master.startswith("local") or spark.cluster == "standalone"


def spark_conf(
    spark: SparkSettings, *, app_name: str, jars: tuple[str, ...] = ()
) -> dict[str, str]:
    """Every ``spark.*`` setting of a session, as plain data (easy to test and to log)."""
    conf = {
        "spark.app.name": app_name,
        "spark.master": spark.master,
        "spark.driver.memory": spark.driver_memory,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.debug.maxToStringFields": "500",
        "spark.sql.codegen.cache.maxEntries": str(spark.codegen_cache_entries),
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": ",".join(spark.jars if spark.jars is not None else jars),
    }
    if _on_this_machine(spark):
        conf |= {
            "spark.default.parallelism": str(spark.shuffle_partitions),
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": str(
                spark.shuffle_partitions
            ),
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.extraJavaOptions": _log4j_option(),
            # Delta computes a table's snapshot with 50 tasks by default: seconds of
            # scheduling per read on a few local cores (bench/batch_throughput.py:
            # Kafka -> gold of 200k events 114 s -> 61 s with it at the partitions' number).
            "spark.databricks.delta.snapshotPartitions": str(spark.shuffle_partitions),
            # VACUUM lists a table's files with this many tasks; Spark's default (10,000,
            # meant for partition discovery on clusters) made the VACUUM of a five-file
            # table take 80 s on two cores (tests/unit/batch_layer/test_maintenance.py:
            # 100 s -> 32 s, compaction included).
            "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(
                spark.shuffle_partitions
            ),
        }
    if spark.cluster == "standalone":
        conf |= {
            "spark.executor.memory": spark.executor_memory,
            "spark.executor.cores": str(spark.executor_cores),
            **({"spark.cores.max": str(spark.max_cores)} if spark.max_cores else {}),
            # The secret itself is read from a file only this user can read, never from a
            # command line (build_spark_session).
            "spark.authenticate": "true",
            "spark.executor.extraJavaOptions": " ".join(
                filter(None, (_log4j_option(), spark.executor_java_options))
            ),
        }
    if spark.driver_java_options:
        options = (conf.get("spark.driver.extraJavaOptions", ""), spark.driver_java_options)
        conf["spark.driver.extraJavaOptions"] = " ".join(filter(None, options))
    return conf | dict(spark.extra_conf)


OPENLINEAGE_LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"


def lineage_conf(lineage: LineageSettings, spark: SparkSettings) -> dict[str, str]:
    """The ``spark.*`` settings of OpenLineage's Spark listener (its jar is among the
    connector jars: ``infra/local/maven/spark/pom.xml``); none when lineage is off.

    >>> from core.settings import LineageSettings, SparkSettings
    >>> conf = lineage_conf(LineageSettings(location="/tmp/ol.jsonl"), SparkSettings())
    >>> conf["spark.openlineage.transport.type"], conf["spark.openlineage.transport.location"]
    ('file', '/tmp/ol.jsonl')
    """
    if not lineage.enabled:
        return {}
    conf = {
        "spark.extraListeners": OPENLINEAGE_LISTENER,
        "spark.openlineage.namespace": lineage.namespace,
        "spark.openlineage.transport.type": lineage.transport,
    }
    if lineage.transport == "file":
        Path(lineage.location).parent.mkdir(parents=True, exist_ok=True)
        conf["spark.openlineage.transport.location"] = str(lineage.location)
    else:
        conf["spark.openlineage.transport.url"] = str(lineage.url)
    if _on_this_machine(spark):
        # The listener defines classes reflectively: Java 17 needs java.security opened.
        options = spark_conf(spark, app_name="-").get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = (
            f"{options} --add-opens=java.base/java.security=ALL-UNNAMED".strip()
        )
    return conf


def fair_allocations(pools: dict[str, tuple[str, int, int]]) -> str:
    """A FAIR scheduler allocation file: ``name -> (schedulingMode, weight, minShare)``.

    >>> print(fair_allocations({"web": ("FIFO", 2, 1)}).splitlines()[2])  # doctest: +ELLIPSIS
    <pool name="web"><schedulingMode>FIFO</schedulingMode><weight>2</weight>...
    """
    lines = [
        f'<pool name="{name}"><schedulingMode>{mode}</schedulingMode><weight>{weight}</weight>'
        f"<minShare>{min_share}</minShare></pool>"
        for name, (mode, weight, min_share) in pools.items()
    ]
    return '<?xml version="1.0"?>\n<allocations>\n' + "\n".join(lines) + "\n</allocations>\n"


def _secret_conf_dir(settings: Settings) -> Path:
    """A ``SPARK_CONF_DIR`` whose ``spark-defaults.conf`` (mode 600) holds the standalone
    cluster's secret: a driver must have it in its conf, and pyspark passes builder settings
    to the JVM as command-line arguments, which every local user can read."""
    conf_dir = settings.local.state_dir / "spark-cluster" / "client-conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    defaults = conf_dir / "spark-defaults.conf"
    defaults.touch(mode=0o600)
    defaults.chmod(0o600)
    secret = settings.spark.auth_secret.get_secret_value()
    defaults.write_text(f"spark.authenticate.secret {secret}\n")
    return conf_dir


def build_spark_session(
    settings: Settings,
    *,
    app_name: str,
    lineage: bool = False,
    extra: dict[str, str] | None = None,
) -> SparkSession:
    """Get (or create) the process's SparkSession configured for the platform; ``lineage``:
    with OpenLineage's listener as ``settings.lineage`` says (the batch steps); ``extra``:
    the application's own settings (read when the JVM starts)."""
    from pyspark.sql import SparkSession

    if _on_this_machine(settings.spark):
        # The driver JVM reads these at launch: keep Spark on loopback, and run the
        # Python workers with this interpreter (the project's venv, not the base one; on
        # this machine's standalone cluster the executors run it too, as a cluster's
        # nodes run the project's image).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if settings.spark.cluster == "standalone":
        os.environ["SPARK_CONF_DIR"] = str(_secret_conf_dir(settings))
    jars = () if settings.spark.jars is not None else local_spark_jars(settings.local.state_dir)
    builder = SparkSession.builder
    conf = spark_conf(settings.spark, app_name=app_name, jars=jars)
    if lineage:
        conf |= lineage_conf(settings.lineage, settings.spark)
    conf |= extra or {}
    archive = local_class_archive(settings.local.state_dir)
    options = conf.get("spark.driver.extraJavaOptions", "")
    # A driver writing an archive (platformctl.class_archive) cannot map one as well.
    writing = "-XX:ArchiveClassesAtExit" in options
    if settings.spark.master.startswith("local") and archive.exists() and not writing:
        conf["spark.driver.extraJavaOptions"] = f"{options} {class_archive_options(archive)}"
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
