"""Error answers the standard server libraries can read (no Kafka needed: refused before it)."""

from __future__ import annotations

import asyncio

import httpx

from core.settings import Settings
from ingest.app import create_app


def test_a_refusal_carries_code_and_message_as_the_libraries_read_them():
    app = create_app(Settings())

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://collector") as client:
            return await client.post("/v1/track", json={"event": "x"}, auth=("wrong-key", ""))

    answer = asyncio.run(post())
    assert answer.status_code == 401
    body = answer.json()
    # rudder-sdk-python and segment-analytics-python: APIError(status, payload["code"], ...)
    assert (body["code"], body["error"], body["success"]) == ("unauthorized", "unauthorized", False)
    assert body["message"] == "Unknown write key."
