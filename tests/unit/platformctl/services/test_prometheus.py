"""The local Prometheus: no lifecycle API unless asked for; serving scraped with a token."""

from __future__ import annotations

import stat

import yaml

from core.settings import LocalSettings, MonitoringSettings, ServingSettings, Settings
from platformctl.services import prometheus


def test_the_lifecycle_api_is_off_unless_a_setting_asks_for_it(tmp_path):
    local = LocalSettings(state_dir=tmp_path)
    default = prometheus.process(Settings(local=local)).argv
    assert "--web.enable-lifecycle" not in default
    assert "--web.listen-address=127.0.0.1:9090" in default
    asked = Settings(local=local, monitoring=MonitoringSettings(lifecycle_api=True))
    assert "--web.enable-lifecycle" in prometheus.process(asked).argv


def test_serving_is_scraped_with_an_analyst_token_only_prometheus_reads(tmp_path):
    serving = ServingSettings(api_tokens={"prometheus": "scrape-secret", "ana": "other"})
    config = prometheus.write_config(
        Settings(local=LocalSettings(state_dir=tmp_path), serving=serving)
    )
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    authorization = jobs["serving"]["authorization"]
    assert authorization["type"] == "Bearer"
    token_file = tmp_path / "prometheus" / "serving.token"
    assert authorization["credentials_file"] == str(token_file)
    assert token_file.read_text() == "scrape-secret"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert "scrape-secret" not in config.read_text()
    assert all("authorization" not in jobs[name] for name in ("collector", "speed", "batch"))
