"""CollectorSettings: per-source CORS, safe defaults, no wildcard in production; IP handling."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from core.settings import (
    CollectorSettings,
    MonitoringSettings,
    ServingSettings,
    Settings,
    SqlSettings,
    settings_env,
)

PROD_TOKENS = ServingSettings(api_tokens={"analyst": "prod-analyst-token-0001"})
PROD_SQL = SqlSettings(token="prod-sql-token-0001")
PROD_METRICS = MonitoringSettings(metrics_token="prod-metrics-token-0001")


def test_the_local_development_source_allows_any_origin_by_default() -> None:
    assert CollectorSettings().allowed_origins == {"local-website": ("*",)}


def test_other_sources_allow_no_origin_unless_listed() -> None:
    assert CollectorSettings(write_keys={"shop": "shop-write-key-0001"}).allowed_origins == {}
    listed = CollectorSettings(
        write_keys={"shop": "shop-write-key-0001"},
        allowed_origins={"shop": ["https://shop.example"]},
    )
    assert listed.allowed_origins == {"shop": ("https://shop.example",)}


def test_origins_of_unknown_sources_and_malformed_origins_are_refused() -> None:
    with pytest.raises(ValidationError, match="sources without a write key"):
        CollectorSettings(
            write_keys={"shop": "shop-write-key-0001"},
            allowed_origins={"blog": ["https://b.example"]},
        )
    with pytest.raises(ValidationError, match="is not an origin"):
        CollectorSettings(
            write_keys={"shop": "shop-write-key-0001"},
            allowed_origins={"shop": ["https://s.example/"]},
        )


def test_production_refuses_a_wildcard_unless_explicitly_allowed() -> None:
    wildcard = {"write_keys": {"shop": "prod-write-key-0001"}, "allowed_origins": {"shop": ["*"]}}
    with pytest.raises(ValidationError, match="allow any origin"):
        Settings(
            environment="prod",
            collector=CollectorSettings(**wildcard),
            serving=PROD_TOKENS,
            sql=PROD_SQL,
            monitoring=PROD_METRICS,
        )
    explicit = CollectorSettings(**wildcard, allow_any_origin=True)
    assert Settings(
        environment="prod",
        collector=explicit,
        serving=PROD_TOKENS,
        sql=PROD_SQL,
        monitoring=PROD_METRICS,
    )
    listed = CollectorSettings(
        write_keys={"shop": "prod-write-key-0001"},
        allowed_origins={"shop": ["https://shop.example"]},
    )
    assert Settings(
        environment="prod",
        collector=listed,
        serving=PROD_TOKENS,
        sql=PROD_SQL,
        monitoring=PROD_METRICS,
    )


def test_environment_variables_set_origins_and_keep_write_keys_as_they_were(monkeypatch) -> None:
    monkeypatch.setenv(
        "WAP_COLLECTOR__WRITE_KEYS",
        '{"shop": "shop-write-key-0001", "blog": "blog-write-key-0001"}',
    )
    monkeypatch.setenv("WAP_COLLECTOR__ALLOWED_ORIGINS", '{"shop": ["https://shop.example"]}')
    settings = Settings()
    assert settings.collector.source_of() == {
        "shop-write-key-0001": "shop",
        "blog-write-key-0001": "blog",
    }
    assert settings.collector.allowed_origins == {"shop": ("https://shop.example",)}
    monkeypatch.delenv("WAP_COLLECTOR__WRITE_KEYS")
    monkeypatch.delenv("WAP_COLLECTOR__ALLOWED_ORIGINS")
    for key, value in settings_env(settings).items():
        monkeypatch.setenv(key, value)
    assert Settings().collector == settings.collector


def test_ips_are_truncated_by_default_and_a_hash_needs_a_long_secret_key() -> None:
    assert CollectorSettings().ip_anonymisation == "truncate"
    with pytest.raises(ValidationError, match="needs a secret key"):
        CollectorSettings(ip_anonymisation="hash")
    with pytest.raises(ValidationError, match="at least 32"):
        CollectorSettings(ip_anonymisation="hash", hash_key="short")
    with pytest.raises(ValidationError, match="ip_anonymisation"):
        CollectorSettings(ip_anonymisation="mask")


def test_environment_variables_choose_the_ip_hash_and_keep_the_key_secret(monkeypatch) -> None:
    key = "f" * 64
    monkeypatch.setenv("WAP_COLLECTOR__IP_ANONYMISATION", "hash")
    monkeypatch.setenv("WAP_COLLECTOR__HASH_KEY", key)
    settings = Settings()
    assert settings.collector.ip_anonymisation == "hash"
    assert settings.collector.hash_key.get_secret_value() == key
    assert key not in repr(settings)
    monkeypatch.delenv("WAP_COLLECTOR__IP_ANONYMISATION")
    monkeypatch.delenv("WAP_COLLECTOR__HASH_KEY")
    for name, value in settings_env(settings).items():
        monkeypatch.setenv(name, value)
    assert Settings().collector == settings.collector


def test_the_collector_runs_two_workers_unless_told_otherwise(monkeypatch) -> None:
    assert CollectorSettings().workers == 2
    monkeypatch.setenv("WAP_COLLECTOR__WORKERS", "4")
    assert Settings().collector.workers == 4
    with pytest.raises(ValidationError, match="workers"):
        CollectorSettings(workers=0)
