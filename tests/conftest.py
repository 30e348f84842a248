"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import uuid

import pytest

from core.settings import Settings, load_settings


@pytest.fixture(scope="session")
def settings() -> Settings:
    """The settings the suite runs with: local defaults unless WAP_* says otherwise."""
    return load_settings()


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A name no other test uses: for topics, keyspaces, tables and paths."""
    test = "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[:24]
    return f"t_{test}_{uuid.uuid4().hex[:8]}"
