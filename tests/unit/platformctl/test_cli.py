"""The command line's service names (no service is started)."""

from __future__ import annotations

from pathlib import Path

from platformctl.cli import main


def test_airflow_stands_for_its_three_processes(capsys):
    assert main(["logs", "airflow", "-n", "1"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("==> ")]
    assert [Path(header.split()[1]).name for header in headers] == [
        "airflow-api-server.log",
        "airflow-dag-processor.log",
        "airflow-scheduler.log",
    ]


def test_kafka_cluster_stands_for_its_three_nodes(capsys):
    assert main(["logs", "kafka-cluster", "-n", "1"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("==> ")]
    assert [Path(header.split()[1]).name for header in headers] == [
        "kafka.out",
        "kafka-2.out",
        "kafka-3.out",
    ]


def test_cassandra_ring_stands_for_its_three_nodes(capsys):
    assert main(["logs", "cassandra-ring", "-n", "1"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.startswith("==> ")]
    assert [Path(header.split()[1]).name for header in headers] == [
        "cassandra.out",
        "cassandra-2.out",
        "cassandra-3.out",
    ]
