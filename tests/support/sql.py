"""The SQL server the serving tests share: one supervised server over the published lake."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from core.settings import Settings, SqlSettings
from tests.support.analyst import run_analyst_script
from tests.support.ports import free_port

__all__ = [
    "ATTACKER",
    "DETACHED_S",
    "SERVICE_TOKENS",
    "SQL_TOKEN",
    "TIME_LIMIT_S",
    "run_attacker",
    "sql_metrics",
    "sql_settings",
]

ATTACKER = Path(__file__).parents[1] / "integration" / "serving" / "sql_attacks.py"
"""The hostile analyst's script (run in the analyst's virtualenv, nothing of this repo)."""

SQL_TOKEN = "sql-test-token-0001"
SERVICE_TOKENS = {
    "tester": "serving-test-token",
    "attacker": "attacker-token-0001",
    "analyst": "analyst-token-00001",
}
"""The serving apps' service tokens (``serving.api_tokens``), known to the SQL server as
they are in production, where both read the same settings: ``POST /v1/sql`` sends its
caller's token on, and the server identifies it."""
TIME_LIMIT_S = 60.0
"""A statement's time limit: above the time a client that left is given (``DETACHED_S``), and
above what an analyst's first statements take on a server just started while the suite's
other worker runs Spark beside it (the notebook's first statements over a view take 8-11 s
on a cold server alone, 1-3.5 s warm; at 30 s the notebook's statements ran out of time
with the suite's other worker busy)."""
DETACHED_S = 4.0


def sql_settings(lake: Settings, state_dir: Path) -> Settings:
    """``lake``'s settings with a SQL server of short limits, its state under ``state_dir``,
    an audit topic of its own (``start_sql_server`` creates it; the platform's topic is for
    the platform's services):
    a health query every 3 s (a restart after three failures in a row, as in production); a
    catalog refresh every 300 s (the published lake never changes, and the server lives
    until the session ends: a refresh costs Spark jobs and Cassandra reads the other tests
    would wait behind)."""
    # The server generates code, as deployed (the suite's other Spark processes interpret
    # expressions, tests/conftest.py): what a statement costs, and whether its tasks stop
    # when cancelled, differ between the two (range's generated loop never looked at the
    # kill flag when its rows went to a consumer outside it; the interpreted one does).
    generated = {
        k: v for k, v in lake.spark.extra_conf.items() if not k.startswith("spark.sql.codegen.")
    }
    audit = f"{lake.cassandra.keyspace.replace('_', '-')}.audit.{uuid.uuid4().hex[:8]}"
    return lake.model_copy(
        update={
            "kafka": lake.kafka.model_copy(update={"audit_topic": audit}),
            "spark": lake.spark.model_copy(update={"extra_conf": generated}),
            "local": lake.local.model_copy(update={"state_dir": state_dir}),
            "serving": lake.serving.model_copy(
                update={"api_tokens": {k: SecretStr(v) for k, v in SERVICE_TOKENS.items()}}
            ),
            "sql": SqlSettings(
                port=free_port(),
                health_port=free_port(),
                token=SQL_TOKEN,
                refresh_s=300,
                max_rows=500,
                time_limit_s=TIME_LIMIT_S,
                detached_timeout_s=DETACHED_S,
                health_interval_s=3,
                health_timeout_s=10,
                restart_after=3,
            ),
        }
    )


def run_attacker(python: Path, settings: Settings, folder: Path, mode: str, /, **job) -> dict:
    """The attacker's script in ``mode`` against ``settings``' SQL server: its JSON answer."""
    job = {"url": settings.sql.url(), "mode": mode, **job}
    return run_analyst_script(python, ATTACKER, folder / f"{mode}.json", job)


def sql_metrics(server) -> dict[tuple, float]:
    """The SQL server's ``wap_sql_*`` samples, by name and sorted labels."""
    text = httpx.get(f"{server.health_url}/metrics", timeout=30).text
    return {
        (sample.name, *sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("wap_sql_")
    }
