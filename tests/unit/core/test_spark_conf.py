from __future__ import annotations

import pytest

from core.settings import SparkSettings
from core.spark import local_spark_jars, spark_conf


def test_conf_sets_delta_rocksdb_and_jars():
    conf = spark_conf(SparkSettings(), app_name="job", jars=("/j/a.jar", "/j/b.jar"))
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.sql.streaming.stateStore.providerClass"].endswith(
        "RocksDBStateStoreProvider"
    )
    assert conf["spark.jars"] == "/j/a.jar,/j/b.jar"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    # VACUUM's file listing: as many tasks as the local cores, not Spark's 10,000.
    assert conf["spark.sql.sources.parallelPartitionDiscovery.parallelism"] == "4"


def test_cluster_settings_replace_local_ones():
    spark = SparkSettings(
        master="yarn",
        shuffle_partitions=200,
        jars=("s3://jars/delta.jar",),
        extra_conf={"spark.executor.memory": "8g"},
    )
    conf = spark_conf(spark, app_name="job", jars=("/local.jar",))
    assert conf["spark.master"] == "yarn"
    assert conf["spark.jars"] == "s3://jars/delta.jar"
    assert conf["spark.executor.memory"] == "8g"
    assert "spark.driver.host" not in conf  # only pinned to loopback locally


def test_missing_local_jars_say_how_to_install(tmp_path):
    with pytest.raises(FileNotFoundError, match="make install"):
        local_spark_jars(tmp_path)


def test_driver_java_options_join_the_drivers_own():
    local = spark_conf(SparkSettings(driver_java_options="-XX:+UseSerialGC"), app_name="job")
    options = local["spark.driver.extraJavaOptions"].split()
    assert options[0].startswith("-Dlog4j2.configurationFile=") and options[1:] == [
        "-XX:+UseSerialGC"
    ]
    cluster = spark_conf(SparkSettings(master="yarn", driver_java_options="-Xss4m"), app_name="j")
    assert cluster["spark.driver.extraJavaOptions"] == "-Xss4m"
    assert "spark.driver.extraJavaOptions" not in spark_conf(
        SparkSettings(master="yarn"), app_name="j"
    )
