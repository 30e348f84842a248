"""The SQL server's executors as plain data: the master, the task reaper, their Spark home."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.settings import Settings, SparkSettings, SqlSettings
from serving.connect.executors import cluster_master, megabytes, prepare, task_conf


def _settings(master: str = "local[2]", **sql) -> Settings:
    return Settings(spark=SparkSettings(master=master), sql=SqlSettings(**sql))


def test_a_local_master_becomes_a_cluster_of_executor_jvms():
    settings = _settings(executors=2, executor_slots=4, executor_memory="1536m")
    assert cluster_master(settings) == "local-cluster[2,4,1536]"
    assert cluster_master(_settings("local")) == "local-cluster[3,3,1024]"


@pytest.mark.parametrize("master", ["spark://10.0.0.1:7077", "yarn", "k8s://https://k"])
def test_a_cluster_keeps_its_own_executors(master, tmp_path):
    assert cluster_master(_settings(master)) is None
    assert prepare(_settings(master), tmp_path) == {}


def test_a_cancelled_task_that_goes_on_ends_its_executor():
    conf = task_conf(SqlSettings(task_kill_timeout_s=8))
    assert conf["spark.task.reaper.enabled"] == "true"
    assert conf["spark.task.reaper.killTimeout"] == "8000ms"
    assert conf["spark.task.reaper.pollingInterval"] == "2000ms"
    assert conf["spark.task.maxFailures"] == "3"  # two executors can end at once


def test_memory_sizes_are_read_as_the_jvm_reads_them():
    assert [megabytes(size) for size in ("2g", "512m", "1024", "2048k")] == [2048, 512, 1024, 2]
    with pytest.raises(ValueError, match="768m or 1g"):
        megabytes("a lot")


def test_the_executors_home_secret_and_settings(tmp_path, monkeypatch):
    for name in ("SPARK_HOME", "SPARK_CONF_DIR", "SPARK_SCALA_VERSION"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "spark" / "home" / "work" / "app-old").mkdir(parents=True)
    conf = prepare(_settings(executor_memory="2g"), tmp_path, ("/j/delta.jar", "/j/guard.jar"))
    home = tmp_path / "spark" / "home"
    assert conf["spark.master"] == "local-cluster[3,3,2048]"
    assert conf["spark.executor.memory"] == "2048m"
    assert conf["spark.authenticate"] == "true"
    # The jars from this machine's disk: an executor fetches none before its first task.
    assert conf["spark.jars"] == ""
    assert conf["spark.executor.extraClassPath"] == "/j/delta.jar:/j/guard.jar"
    assert conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"]
    assert "-XX:+ExitOnOutOfMemoryError" in conf["spark.executor.extraJavaOptions"]
    assert "spark.authenticate.secret" not in conf  # never on a command line
    assert (home / "jars").is_symlink() and (home / "jars" / "..").resolve().name == "pyspark"
    assert list((home / "work").iterdir()) == []  # the previous server's files are gone
    defaults = tmp_path / "spark" / "conf" / "spark-defaults.conf"
    assert defaults.stat().st_mode & 0o777 == 0o600
    first = defaults.read_text()
    assert first.startswith("spark.authenticate.secret ") and len(first.split()[1]) == 64
    assert os.environ["SPARK_HOME"] == str(home)
    assert Path(os.environ["SPARK_CONF_DIR"]) == defaults.parent
    prepare(_settings(), tmp_path)
    assert defaults.read_text() != first  # a new secret at each start
