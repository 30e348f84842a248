"""The collector as its real process (``python -m ingest``), attacked: what a 404 tells a
website about the machine, its metrics and health figures read without the metrics token,
and connections that send half a request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.settings import CollectorSettings, Settings
from tests.integration.service_process import service_process
from tests.integration.slow_loris import seconds_until_closed
from tests.support.operator import operator as operator_auth
from tests.support.ports import free_port

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def collector_process(local_platform: Settings, tmp_path_factory) -> Iterator[tuple[str, Path]]:
    """The collector with no analytics.js installed (an empty library folder) and a 2 s
    header timeout; yields its URL and its log."""
    home = tmp_path_factory.mktemp("collector")
    port = free_port()
    settings = local_platform.model_copy(
        update={
            "collector": CollectorSettings(
                port=port,
                header_timeout_s=2.0,
                browser_library_dir=home / "node_modules",
                suppressions_wait_s=0,
            )
        }
    )
    log = home / "collector.log"
    with service_process(["ingest"], settings, port, log) as url:
        yield url, log


def test_the_metrics_take_the_metrics_token(collector_process, local_platform):
    url, _ = collector_process
    token = local_platform.monitoring.metrics_token.get_secret_value()
    key = CollectorSettings().write_keys["local-website"].get_secret_value()
    anonymous = httpx.get(f"{url}/metrics")
    assert anonymous.status_code == 401 and anonymous.headers["WWW-Authenticate"] == "Bearer"
    assert "WAP_MONITORING__METRICS_TOKEN" in anonymous.json()["message"]
    for wrong in ("Bearer", "Bearer guess", f"Bearer {key}", f"Basic {token}"):
        assert httpx.get(f"{url}/metrics", headers={"Authorization": wrong}).status_code == 401
    scraped = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    assert scraped.status_code == 200 and "collector_producer_queue_depth" in scraped.text


def test_health_shows_a_probe_its_status_and_an_operator_its_figures(
    collector_process, local_platform
):
    url, _ = collector_process
    probe = httpx.get(f"{url}/health")
    assert (probe.status_code, probe.json()) == (200, {"status": "ok"})
    guessed = httpx.get(f"{url}/health", headers={"Authorization": "Bearer guess"})
    assert guessed.json() == {"status": "ok"}
    operator = httpx.get(f"{url}/health", headers=operator_auth(local_platform))
    assert operator.status_code == 200 and operator.json()["kafka"] == "reachable"
    assert {"queue_depth", "workers", "contract", "suppressions"} <= set(operator.json())


def test_a_missing_library_bundle_is_a_404_that_names_no_path(collector_process):
    url, log = collector_process
    key = CollectorSettings().write_keys["local-website"].get_secret_value()
    for path in (f"/analytics.js/v1/{key}/analytics.min.js", "/analytics-next/bundles/x.js"):
        answer = httpx.get(f"{url}{path}")
        assert answer.status_code == 404 and answer.json()["error"] == "not_installed"
        message = answer.json()["message"]
        assert "make install" in message
        assert "/" not in message.replace("`make install`", "")
        assert "node_modules" not in answer.text and str(log.parent) not in answer.text


def test_connections_that_send_half_a_request_are_closed(collector_process):
    url, _ = collector_process
    assert seconds_until_closed(int(url.rsplit(":", 1)[1])) < 6
    assert httpx.get(f"{url}/health").status_code == 200
