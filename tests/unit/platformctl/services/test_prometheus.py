"""The local Prometheus: no lifecycle API unless asked for; the services scraped with a token."""

from __future__ import annotations

import stat

import yaml

from core.settings import LocalSettings, MonitoringSettings, Settings
from platformctl.services import prometheus


def test_the_lifecycle_api_is_off_unless_a_setting_asks_for_it(tmp_path):
    local = LocalSettings(state_dir=tmp_path)
    default = prometheus.process(Settings(local=local)).argv
    assert "--web.enable-lifecycle" not in default
    assert "--web.listen-address=127.0.0.1:9090" in default
    asked = Settings(local=local, monitoring=MonitoringSettings(lifecycle_api=True))
    assert "--web.enable-lifecycle" in prometheus.process(asked).argv


def test_the_services_are_scraped_with_the_metrics_token_only_prometheus_reads(tmp_path):
    monitoring = MonitoringSettings(metrics_token="scrape-secret-of-this-test")
    config = prometheus.write_config(
        Settings(local=LocalSettings(state_dir=tmp_path), monitoring=monitoring)
    )
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    token_file = tmp_path / "prometheus" / "metrics.token"
    for name in ("collector", "serving", "batch"):
        assert jobs[name]["authorization"] == {
            "type": "Bearer",
            "credentials_file": str(token_file),
        }
    assert token_file.read_text() == "scrape-secret-of-this-test"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert "scrape-secret" not in config.read_text()
    assert "authorization" not in jobs["speed"]
