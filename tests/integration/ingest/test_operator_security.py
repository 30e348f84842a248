"""The collector as its real process (``python -m ingest``), attacked: what a 404 tells a
website about the machine, and connections that send half a request."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from core.settings import CollectorSettings, Settings
from tests.integration.service_process import service_process
from tests.integration.slow_loris import seconds_until_closed
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
