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


def test_a_write_key_whose_source_goes_to_no_pipeline_stops_the_collector_from_starting():
    """Every pipeline names its sources and none is the default: the source ``web`` has a
    write key and nowhere to go. Refused at start, naming the source and the fix."""
    import pytest

    from core.settings import CollectorSettings
    from pipelines import Collector, DeclarationError, PipelineSpec

    mobile = PipelineSpec(
        "mobile_app", "web_events", 1, ("m",), topic="m.v1", arrival=Collector(("ios",))
    )
    settings = Settings(
        collector=CollectorSettings(
            write_keys={"web": "web-write-key-0001", "ios": "ios-write-key-0001"}
        )
    )
    with pytest.raises(DeclarationError, match=r"sources \['web'\].*go to no pipeline"):
        create_app(settings, pipelines=(mobile,))
