"""Serving as its real process (``python -m serving serve``), attacked: its API description
and its metrics read without a token, and connections that send half a request."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from core.settings import Settings
from tests.integration.service_process import service_process
from tests.integration.slow_loris import seconds_until_closed

pytestmark = [pytest.mark.integration]

SERVING = {"header_timeout_s": 2.0}
"""Read by ``serving_settings``: this module's server drops a half-sent request after 2 s."""


@pytest.fixture(scope="module")
def serving_process(serving_settings: Settings, tmp_path_factory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("serving") / "serving.log"
    port = serving_settings.serving.port
    with service_process(["serving", "serve"], serving_settings, port, log) as url:
        yield url


@pytest.mark.parametrize("path", ["/docs", "/openapi.json", "/metrics"])
def test_the_api_description_and_the_metrics_take_the_analyst_token(
    serving_process: str, api_token: str, path: str
):
    anonymous = httpx.get(f"{serving_process}{path}")
    assert anonymous.status_code == 401, anonymous.text[:200]
    assert anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert anonymous.json()["error"] == "unauthorized"
    guessed = httpx.get(f"{serving_process}{path}", headers={"Authorization": "Bearer guess"})
    assert guessed.status_code == 401
    answer = httpx.get(f"{serving_process}{path}", headers={"Authorization": f"Bearer {api_token}"})
    assert answer.status_code == 200
    assert {"/docs": "swagger", "/openapi.json": '"paths"', "/metrics": "wap_"}[path] in answer.text


def test_the_metrics_take_the_operators_metrics_token_too(
    serving_process: str, serving_settings: Settings
):
    token = serving_settings.monitoring.metrics_token.get_secret_value()
    scraped = httpx.get(f"{serving_process}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert scraped.status_code == 200 and "wap_" in scraped.text
    empty = httpx.get(f"{serving_process}/metrics", headers={"Authorization": "Bearer"})
    assert empty.status_code == 401
    # It reads figures, not data.
    data = httpx.get(f"{serving_process}/v1/views", headers={"Authorization": f"Bearer {token}"})
    assert data.status_code == 401


def test_health_and_the_dashboard_page_stay_open(serving_process: str):
    assert httpx.get(f"{serving_process}/health").status_code in (200, 503)
    assert httpx.get(f"{serving_process}/dashboard").status_code == 200


def test_connections_that_send_half_a_request_are_closed(serving_process: str, serving_settings):
    assert seconds_until_closed(serving_settings.serving.port) < 6
    assert httpx.get(f"{serving_process}/dashboard").status_code == 200
