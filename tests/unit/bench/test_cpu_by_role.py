"""The CPU-by-role report: each process's role, and a command's CPU found and attributed."""

from __future__ import annotations

import os
import sys

import pytest

from bench.cpu_by_role import main, role

PYSPARK_JVM = (
    "/usr/lib/jvm/java-17-openjdk-amd64/bin/java -cp /v/site-packages/pyspark/conf:"
    "/v/site-packages/pyspark/jars/* -Xmx1g org.apache.spark.deploy.SparkSubmit pyspark-shell"
)


@pytest.mark.parametrize(
    ("parent", "expected"),
    [
        ("/v/bin/python -m speed_layer --instance test", "Spark driver of a speed job"),
        ("/v/bin/python -m batch_layer serve", "Spark driver of a batch step server"),
        ("/v/bin/python -m serving.connect --supervisor 7", "Spark driver of a SQL server"),
        (
            "/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))",
            "Spark driver of a test worker",
        ),
        ("/v/bin/python notebook.py", "Spark driver of a another process"),
    ],
)
def test_a_spark_driver_is_named_by_what_started_it(parent, expected):
    assert role(PYSPARK_JVM, parent) == expected


def test_the_launcher_script_is_the_driver_it_becomes():
    launcher = "env bash /v/bin/spark-submit --conf spark.app.name=x pyspark-shell"
    assert role(launcher, "/v/bin/python -m batch_layer serve") == (
        "Spark driver of a batch step server"
    )


def test_services_and_workers_are_named_whatever_started_them():
    assert role("java -Xms512m kafka.Kafka /p/server.properties", "bash") == "Kafka"
    assert role("java -cp x org.apache.spark.deploy.worker.Worker spark://h:7077") == (
        "Spark master and workers (standalone)"
    )
    assert role("java -cp x org.apache.spark.executor.CoarseGrainedExecutorBackend") == (
        "Spark executors (standalone)"
    )
    assert role("/p/airflow-venv/bin/python airflow_runner.py test dag") == "Airflow"
    assert role("/v/bin/python -m speed_layer --instance test") == "speed job (Python)"
    assert role("/usr/bin/gzip -9 file") == "other: gzip -9 file"


def test_a_commands_cpu_is_found_and_its_exit_code_kept(capsys):
    burn = (
        "import sys, time\n"
        "end = time.process_time() + 0.6\n"
        "while time.process_time() < end: pass\n"
        "sys.exit(3)"
    )
    assert main(["--every", "0.1", "--", sys.executable, "-c", burn]) == 3
    report = capsys.readouterr().err
    name = f"other: {os.path.basename(sys.executable)}"
    line = next(line for line in report.splitlines() if name in line)
    assert float(line.split()[0]) >= 0.5, report
    assert "cores busy" in report
