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

from core.settings import PROJECT_ROOT, Settings, SparkSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["build_spark_session", "local_spark_jars", "spark_conf"]

LOCAL_LOG4J2 = PROJECT_ROOT / "infra" / "local" / "spark" / "log4j2.properties"
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
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        "spark.jars": ",".join(spark.jars if spark.jars is not None else jars),
    }
    if spark.master.startswith("local"):
        conf |= {
            "spark.default.parallelism": str(spark.shuffle_partitions),
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": str(
                spark.shuffle_partitions
            ),
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOCAL_LOG4J2.as_uri()}",
            # Delta computes a table's snapshot with 50 tasks by default: seconds of
            # scheduling per read on a few local cores (bench/batch_throughput.py:
            # Kafka -> gold of 200k events 114 s -> 61 s with it at the partitions' number).
            "spark.databricks.delta.snapshotPartitions": str(spark.shuffle_partitions),
        }
    return conf | dict(spark.extra_conf)


def build_spark_session(settings: Settings, *, app_name: str) -> SparkSession:
    """Get (or create) the process's SparkSession configured for the platform."""
    from pyspark.sql import SparkSession

    if settings.spark.master.startswith("local"):
        # The driver JVM reads these at launch: keep Spark on loopback, and run the
        # Python workers with this interpreter (the project's venv, not the base one).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = () if settings.spark.jars is not None else local_spark_jars(settings.local.state_dir)
    builder = SparkSession.builder
    for key, value in spark_conf(settings.spark, app_name=app_name, jars=jars).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
