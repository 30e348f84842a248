"""The collector keeps an idle connection open longer than clients do, so reuse never races."""

from __future__ import annotations

import http.client
import time

import pytest

from ingest.server import server_config
from tests.integration.asgi import serving
from tests.support.collector import collector_settings

pytestmark = pytest.mark.integration


def test_an_idle_connection_is_still_served_after_a_client_pause(local_platform, unique_name):
    # HTTP libraries drop idle connections after about 5 s (httpx, Node); a server that
    # closes at the same moment resets requests sent on them, which clients see unanswered.
    settings = collector_settings(local_platform, unique_name, write_keys={"s": "s-write-key-0001"})
    with serving(server_config(settings)):
        connection = http.client.HTTPConnection("127.0.0.1", settings.collector.port, timeout=10)
        statuses = []
        for pause_s in (0, 6):
            time.sleep(pause_s)
            connection.request("POST", "/v1/page", body=b"{}")
            answer = connection.getresponse()
            answer.read()
            statuses.append(answer.status)
        assert statuses == [401, 401]
        connection.close()
