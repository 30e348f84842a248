"""Smoke DAG: proves the Airflow venv can parse a Task SDK DAG and run it end to end.

``produce`` returns a value (pushed to XCom), ``check`` receives it through XCom and
raises if it is not the expected one, so a successful run shows that parsing,
the metadata DB, task execution and XCom round-trips all work. No Spark involved.
"""

from __future__ import annotations

from datetime import UTC, datetime

from airflow.sdk import dag, task

EXPECTED = {"rows": 3, "source": "platform_smoke"}


@dag(
    dag_id="platform_smoke",
    schedule=None,
    start_date=datetime(2025, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["platform", "smoke"],
)
def platform_smoke() -> None:
    @task
    def produce() -> dict[str, object]:
        return dict(EXPECTED)

    @task
    def check(value: dict[str, object]) -> None:
        if value != EXPECTED:
            raise ValueError(f"XCom round-trip broken: got {value!r}, want {EXPECTED!r}")

    check(produce())


platform_smoke()
