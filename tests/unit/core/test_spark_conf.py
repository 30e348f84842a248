from __future__ import annotations

import pytest

import core.spark
from core.settings import SparkSettings, load_settings
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


def test_executor_java_options_join_the_executors_own_on_a_standalone_cluster():
    spark = SparkSettings(cluster="standalone", executor_java_options="-XX:TieredStopAtLevel=1")
    options = spark_conf(spark, app_name="job")["spark.executor.extraJavaOptions"].split()
    assert options[0].startswith("-Dlog4j2.configurationFile=")
    assert options[1:] == ["-XX:TieredStopAtLevel=1"]
    assert "spark.executor.extraJavaOptions" not in spark_conf(
        SparkSettings(executor_java_options="-Xss4m"), app_name="job"
    )  # local mode has no executor JVM


def test_an_installed_copy_without_the_local_log4j2_file_keeps_spark_s_own(monkeypatch, tmp_path):
    monkeypatch.setattr(core.spark, "LOCAL_LOG4J2", tmp_path / "absent" / "log4j2.properties")
    local = spark_conf(SparkSettings(driver_java_options="-Xss4m"), app_name="job")
    assert local["spark.driver.extraJavaOptions"] == "-Xss4m"
    standalone = spark_conf(SparkSettings(cluster="standalone"), app_name="job")
    assert "log4j2" not in standalone["spark.executor.extraJavaOptions"]


def test_the_standalone_cluster_is_submitted_to_with_bounded_executors_and_its_secret():
    spark = SparkSettings(cluster="standalone", master_port=17077)
    assert spark.master == "spark://127.0.0.1:17077"
    conf = spark_conf(spark, app_name="job")
    assert conf["spark.master"] == "spark://127.0.0.1:17077"
    # One application never takes every core: the speed job, the step server and the SQL
    # server each get executors.
    assert (conf["spark.cores.max"], conf["spark.executor.cores"]) == ("2", "1")
    assert conf["spark.executor.memory"] == spark.executor_memory
    assert conf["spark.authenticate"] == "true"
    # The secret reaches Spark through the environment, never a command line or a log.
    assert spark.auth_secret.get_secret_value() not in str(conf)
    assert conf["spark.driver.host"] == "127.0.0.1"  # the cluster runs on this machine
    # A cluster's master named explicitly wins over the local one.
    assert SparkSettings(cluster="standalone", master="spark://h:7077").master == "spark://h:7077"
    assert "spark.cores.max" not in spark_conf(SparkSettings(master="yarn"), app_name="j")


def test_a_standalone_drivers_secret_is_in_a_file_only_its_user_reads(tmp_path):
    from core.settings import LocalSettings, Settings
    from core.spark import _secret_conf_dir

    settings = Settings(
        local=LocalSettings(state_dir=tmp_path), spark=SparkSettings(cluster="standalone")
    )
    defaults = _secret_conf_dir(settings) / "spark-defaults.conf"
    secret = settings.spark.auth_secret.get_secret_value()
    assert defaults.read_text() == f"spark.authenticate.secret {secret}\n"
    assert defaults.stat().st_mode & 0o077 == 0


def _jvm_flags(*options: str) -> dict[str, str]:
    import shutil
    import subprocess

    # The launcher the platform starts its JVMs with (WAP_LOCAL__JAVA), found as it finds it.
    java = shutil.which(load_settings().local.java)
    assert java, "the JDK runs Spark here"
    done = subprocess.run(
        [java, *options, "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = (line.split() for line in done.stdout.splitlines() if " = " in line)
    return {row[1]: row[3] for row in rows if len(row) > 3}


def test_c1_only_keeps_a_tiered_jvm_s_code_cache():
    """``TieredStopAtLevel=1`` alone leaves 48 MB of code cache on JDK 17, which a step
    server's driver filled within a pipeline run (then it stopped compiling and died)."""
    flags = _jvm_flags(*core.spark.C1_ONLY.split())
    assert flags["TieredStopAtLevel"] == "1"
    assert int(flags["ReservedCodeCacheSize"]) >= int(_jvm_flags()["ReservedCodeCacheSize"])
