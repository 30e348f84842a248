"""The platform's Prometheus config and alert rules, checked and tested with ``promtool``.

``promtool`` comes with Debian's ``prometheus`` package, which ``make install``
installs; the rules are rendered from settings exactly as ``platformctl up``
renders them.
"""

from __future__ import annotations

import shutil
import subprocess

import yaml

from core.settings import BatchSettings, LocalSettings, MonitoringSettings, Settings
from platformctl.services.prometheus import TEMPLATE_DIR, render_rules, write_config


def _promtool(*args: str, cwd) -> str:
    promtool = shutil.which("promtool")
    assert promtool, "promtool is installed by `make install` (Debian's prometheus package)"
    done = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_rules_pass_their_promtool_tests(tmp_path):
    (tmp_path / "alerts.yml").write_text(render_rules(Settings()))
    shutil.copy(TEMPLATE_DIR / "alerts.test.yml", tmp_path)
    assert "SUCCESS: 16 rules found" in _promtool("check", "rules", "alerts.yml", cwd=tmp_path)
    assert "SUCCESS" in _promtool("test", "rules", "alerts.test.yml", cwd=tmp_path)


def test_thresholds_come_from_settings():
    settings = Settings(
        monitoring=MonitoringSettings(freshness_alert_s=45, freshness_alert_for="30s"),
        batch=BatchSettings(period="day", lateness_s=600),
    )
    rules = {
        rule["alert"]: rule for rule in yaml.safe_load(render_rules(settings))["groups"][0]["rules"]
    }
    assert rules["SpeedLayerStale"]["expr"].startswith("wap_speed_freshness_seconds > 45 and")
    assert "wap_speed_heartbeat_age_seconds > 45" in rules["SpeedLayerStale"]["expr"]
    assert rules["SpeedLayerStale"]["for"] == "30s"
    assert rules["BatchNotPublishing"]["expr"].endswith(f"> {3 * 86400 + 600}")


def test_the_rendered_config_is_valid_and_scrapes_the_services(tmp_path):
    settings = Settings(local=LocalSettings(state_dir=tmp_path))
    config = write_config(settings)
    assert "SUCCESS" in _promtool("check", "config", str(config), cwd=tmp_path)
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert set(jobs) == {"prometheus", "collector", "serving", "speed", "batch", "sql"}
    assert jobs["speed"]["static_configs"][0]["targets"] == ["127.0.0.1:8096"]
    assert jobs["batch"]["static_configs"][0]["targets"] == ["127.0.0.1:8095"]
    assert jobs["serving"]["static_configs"][0]["targets"] == ["127.0.0.1:8090"]


def test_every_alert_has_a_promtool_test_and_an_operations_entry():
    rules = yaml.safe_load(render_rules(Settings()))["groups"][0]["rules"]
    alerts = {rule["alert"] for rule in rules}
    tests = yaml.safe_load((TEMPLATE_DIR / "alerts.test.yml").read_text())["tests"]
    tested = {case["alertname"] for test in tests for case in test["alert_rule_test"]}
    assert tested == alerts
    operations = (TEMPLATE_DIR.parents[2] / "docs" / "operations.md").read_text()
    assert all(f"| `{alert}` |" in operations for alert in alerts)
