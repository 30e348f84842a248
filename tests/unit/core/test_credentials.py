"""Every secret setting is refused at load when empty or short, naming the setting and the
fix; an empty presented credential matches nothing; the list of secrets is the settings'."""

from __future__ import annotations

import json
import typing

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from core.credentials import MIN_SECRET_CHARS, SECRET_SETTINGS, bearer_of, owner_of
from core.settings import Settings

MAPS = {"collector.write_keys", "serving.api_tokens"}
"""The secret settings that map names to secrets (JSON in their variable)."""
ELSEWHERE = {
    "kafka.sasl_password",
    "cassandra.password",
    "collector.hash_key",
    "views.identity_key",
}
"""Secrets this rule leaves to others: the Kafka and Cassandra owners' credentials, and the
keys of digests, which ask for at least 32 characters in checks of their own."""


def _variable(setting: str) -> str:
    return "WAP_" + setting.upper().replace(".", "__")


def _value(setting: str, secret: str) -> str:
    return json.dumps({"someone": secret}) if setting in MAPS else secret


@pytest.fixture(autouse=True)
def _no_wap_variables(monkeypatch):
    for key in list(__import__("os").environ):
        if key.startswith("WAP_"):
            monkeypatch.delenv(key)


@pytest.mark.parametrize("setting", SECRET_SETTINGS)
@pytest.mark.parametrize("secret", ["", "Qz", "fifteen-chars!!"])
def test_an_empty_or_short_secret_is_refused_at_load_naming_the_setting(
    monkeypatch, setting, secret
):
    monkeypatch.setenv(_variable(setting), _value(setting, secret))
    with pytest.raises(ValidationError) as refused:
        Settings()
    message = str(refused.value)
    assert setting in message and _variable(setting) in message
    assert f"has {len(secret)} characters" in message and "openssl rand -hex 32" in message
    if secret:
        assert secret not in message  # a refused secret is not echoed


@pytest.mark.parametrize("setting", SECRET_SETTINGS)
def test_a_secret_of_the_minimum_length_is_taken(monkeypatch, setting):
    monkeypatch.setenv(_variable(setting), _value(setting, "s" * MIN_SECRET_CHARS))
    section, field = setting.split(".")
    value = getattr(getattr(Settings(), section), field)
    secret = value["someone"] if setting in MAPS else value
    assert secret.get_secret_value() == "s" * MIN_SECRET_CHARS


def test_every_local_default_is_long_enough():
    settings = Settings()
    for setting in SECRET_SETTINGS:
        section, field = setting.split(".")
        value = getattr(getattr(settings, section), field)
        for secret in value.values() if setting in MAPS else [value]:
            assert len(secret.get_secret_value()) >= MIN_SECRET_CHARS, setting


def _secret_fields(model: type[BaseModel], prefix: str) -> set[str]:
    found = set()
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found |= _secret_fields(annotation, f"{name}.")
        elif "SecretStr" in repr(annotation) or SecretStr in typing.get_args(annotation):
            found.add(prefix + name)
    return found


def test_the_list_of_secrets_is_every_secret_setting_but_the_ones_others_own():
    assert _secret_fields(Settings, "") - ELSEWHERE == set(SECRET_SETTINGS)


@pytest.mark.parametrize("given", ["", None])
def test_an_empty_credential_matches_nothing_even_an_empty_token(given):
    assert owner_of(given, [("empty", b""), ("ana", b"a-token-of-sixteen")]) is None


def test_a_credential_matches_its_owner_only():
    tokens = [("ana", b"ana-token-0000001"), ("bob", b"bob-token-0000001")]
    assert owner_of("bob-token-0000001", tokens) == "bob"
    assert owner_of("bob-token-000000", tokens) is None


@pytest.mark.parametrize(
    ("header", "credential"),
    [
        ("Bearer abc", "abc"),
        ("bearer   abc  ", "abc"),
        ("Bearer ", None),
        ("Bearer", None),
        ("Basic abc", None),
        ("", None),
        (None, None),
    ],
)
def test_the_bearer_credential_of_a_header(header, credential):
    assert bearer_of(header) == credential
