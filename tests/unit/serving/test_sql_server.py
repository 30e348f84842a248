"""The SQL server's settings for Spark, its scheduler pools and its metrics, as plain data."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from core.settings import Settings, SqlSettings
from serving.connect.health import _driver_metrics
from serving.connect.host import ANALYST_POOLS, PLATFORM_POOL, _pools, server_conf


def _conf(**sql) -> dict[str, str]:
    settings = Settings(sql=SqlSettings(**sql))
    return server_conf(settings, Path("/x/guard.jar"), ("/x/delta.jar",), "-Dlog=1")


def test_the_guard_is_at_the_protocol_in_the_parser_and_in_the_plans():
    conf = _conf()
    assert conf["spark.connect.grpc.interceptor.classes"] == "platform.sql.ProtocolGuard"
    assert conf["spark.sql.extensions"].endswith(",platform.sql.ReadOnlyGuard")
    assert conf["spark.extraListeners"] == "platform.sql.SqlMetrics"
    assert conf["spark.jars"] == "/x/delta.jar,/x/guard.jar"
    # Plans arrive uncompressed (readable by the interceptor); no ${...} substitution.
    assert conf["spark.connect.session.planCompression.threshold"] == "-1"
    assert conf["spark.sql.variable.substitute"] == "false"


def test_the_limits_come_from_the_sql_settings():
    conf = _conf(
        time_limit_s=12.5,
        max_statement_chars=5000,
        max_statement_depth=9,
        max_plan_depth=100,
        max_result_size="64m",
        max_value_bytes=2_000_000,
        detached_timeout_s=4,
        settable=("spark.sql.session.timeZone",),
    )
    assert conf["spark.platform.sql.timeLimitSeconds"] == "12.5"
    assert conf["spark.platform.sql.maxStatementChars"] == "5000"
    assert conf["spark.platform.sql.maxStatementDepth"] == "9"
    assert conf["spark.platform.sql.settable"] == "spark.sql.session.timeZone"
    assert conf["spark.connect.grpc.marshallerRecursionLimit"] == "100"
    assert conf["spark.driver.maxResultSize"] == "64m"
    assert conf["spark.platform.sql.maxValueBytes"] == "2000000"
    assert conf["spark.connect.execute.manager.detachedTimeout"] == "4000ms"
    assert conf["spark.connect.execute.reattachable.senderMaxStreamDuration"] == "4000ms"
    assert conf["spark.connect.execute.manager.maintenanceInterval"] == "1333ms"


def test_an_out_of_memory_error_ends_the_driver():
    options = _conf()["spark.driver.extraJavaOptions"]
    assert options == "-Dlog=1 -XX:+ExitOnOutOfMemoryError"


def test_every_session_has_a_fair_share_of_the_cores():
    pools = {
        pool.get("name"): (pool.findtext("schedulingMode"), pool.findtext("weight"))
        for pool in ET.fromstring(_pools()).iter("pool")
    }
    assert pools["default"] == ("FAIR", "1")
    assert pools[PLATFORM_POOL] == ("FIFO", "2")
    analysts = [name for name in pools if name.startswith("analysts-")]
    assert len(analysts) == ANALYST_POOLS == 64
    assert {pools[name] for name in analysts} == {("FAIR", "1")}
    assert _conf()["spark.scheduler.mode"] == "FAIR"


def test_the_drivers_figures_become_prometheus_metrics():
    snapshot = {
        "statements": {"succeeded": 5, "refused": 2, "timed_out": 1},
        "refusals": {"rpc": 1, "statement_depth": 1},
        "jobs": {"analysts": 7, "platform": 3},
        "duration": {"bounds": [0.1, 1.0], "counts": [2, 3, 1], "sum": 9.5},
        "active_sessions": 2,
        "active_statements": 1,
        "memory_used": 1000,
        "memory_max": 4000,
        "team_statements": {"web-analytics|ok": 4, "none|refused": 1},
        "audit_dropped": 0,
        "access": {"identify": [4, 2_000_000], "grants": [3, 900_000]},
    }

    class Driver:
        def collect(self):
            return _driver_metrics(snapshot)

    registry = CollectorRegistry()
    registry.register(Driver())
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert samples[("wap_sql_statements_total", (("outcome", "timed_out"),))] == 1
    assert samples[("wap_sql_refusals_total", (("reason", "statement_depth"),))] == 1
    assert samples[("wap_sql_jobs_total", (("pool", "analysts"),))] == 7
    assert samples[("wap_sql_statement_duration_seconds_bucket", (("le", "1.0"),))] == 5
    assert samples[("wap_sql_statement_duration_seconds_bucket", (("le", "+Inf"),))] == 6
    assert samples[("wap_sql_statement_duration_seconds_sum", ())] == 9.5
    assert samples[("wap_sql_active_sessions", ())] == 2
    assert samples[("wap_sql_driver_memory_max_bytes", ())] == 4000
    team = ("wap_sql_team_statements_total", (("outcome", "ok"), ("team", "web-analytics")))
    assert samples[team] == 4
    assert samples[("wap_sql_team_statements_total", (("outcome", "refused"), ("team", "none")))]
    assert samples[("wap_sql_audit_dropped_total", ())] == 0
    assert samples[("wap_sql_access_runs_total", (("part", "identify"),))] == 4
    assert samples[("wap_sql_access_seconds_total", (("part", "grants"),))] == 0.0009


def test_prometheus_finds_the_sql_server_where_its_service_registers_it(tmp_path):
    import shutil
    import subprocess

    import yaml

    from core.settings import LocalSettings, ServingSettings
    from platformctl.services.prometheus import write_config
    from platformctl.services.sql import register_target

    settings = Settings(
        local=LocalSettings(state_dir=tmp_path),
        serving=ServingSettings(api_tokens={"prometheus": "scrape-token-0001"}),
        sql=SqlSettings(health_port=25003),
    )
    config = write_config(settings)
    target = register_target(settings)
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    (files,) = [c["files"] for c in jobs["sql"]["file_sd_configs"]]
    assert [config.parent / f for f in files] == [target]
    assert json.loads(target.read_text()) == [{"targets": ["127.0.0.1:25003"]}]
    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by `make install` (Debian's prometheus package)"
    checked = subprocess.run([promtool, "check", "config", str(config)], capture_output=True)
    assert checked.returncode == 0 and b"does not exist" not in checked.stdout + checked.stderr
