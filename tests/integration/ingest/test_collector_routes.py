"""The collector routes each source's events to its pipeline, against the real Kafka.

Three pipelines take collector traffic here: the default one (every source no other names),
a mobile app's pipeline under the same Segment contract on its own topic, and a pipeline
whose contract is not Segment's (the checkout contract): a Segment call from its source is
refused with 400 and dead-lettered, and nothing reaches its topic.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import uvicorn
from confluent_kafka.admin import AdminClient

from core.settings import Settings
from ingest.app import create_app
from ingest.topics import ensure_topics, pipeline_topics, platform_topics
from pipelines import Collector, PipelineSpec, pipeline
from tests.integration.asgi import serving
from tests.support.collector import collector_settings, consume_all
from tests.support.operator import operator

pytestmark = pytest.mark.integration

KEYS = {"site": "site-write-key-0001", "ios": "ios-write-key-0001", "till": "till-write-key-0001"}


def _pipelines(name: str) -> tuple[PipelineSpec, ...]:
    mobile = PipelineSpec(
        "mobile_app",
        "web_events",
        1,
        ("mobile_screens",),
        topic=f"{name}.mobile.v1",
        arrival=Collector(("ios",)),
    )
    till = PipelineSpec(
        "till",
        "checkouts",
        1,
        ("till_sales",),
        topic=f"{name}.till.v1",
        arrival=Collector(("till",)),
    )
    return (pipeline("web_events"), mobile, till)


def _page(n: int) -> dict:
    """A page call from a minute ago: the live endpoints take events up to seven days old."""
    sent = datetime.now(UTC) - timedelta(minutes=1)
    return {
        "type": "page",
        "messageId": f"route-{n}",
        "anonymousId": f"visitor-{n}",
        "properties": {"path": "/"},
        "originalTimestamp": sent.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }


def test_each_source_s_events_go_to_its_pipeline_s_topic_under_its_contract(
    local_platform: Settings, unique_name: str
):
    settings = collector_settings(local_platform, unique_name, write_keys=KEYS)
    pipelines = _pipelines(unique_name.replace("_", "-"))
    kafka = settings.kafka
    topics = [*platform_topics(kafka), *pipeline_topics(kafka, pipelines)]
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, topics)
    app = create_app(settings, pipelines=pipelines)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=settings.collector.port, log_level="warning"
    )
    try:
        with serving(config) as url:
            answers = {
                source: httpx.post(f"{url}/v1/page", json=_page(n), auth=(key, ""), timeout=30)
                for n, (source, key) in enumerate(KEYS.items())
            }
            metrics = httpx.get(f"{url}/metrics", headers=operator(settings), timeout=30).text
        assert answers["site"].status_code == 200, answers["site"].text
        assert answers["ios"].status_code == 200, answers["ios"].text
        refused = answers["till"]
        assert refused.status_code == 400, refused.text
        assert refused.json()["dead_lettered"] is True

        (site,) = consume_all(settings, kafka.events_topic, 1)
        (ios,) = consume_all(settings, pipelines[1].topic, 1)
        assert (json.loads(site.value())["source_id"], json.loads(ios.value())["source_id"]) == (
            "site",
            "ios",
        )
        assert dict(ios.headers())["contract"] == b"web-events/1.1.0"
        assert consume_all(settings, pipelines[2].topic, 1, timeout_s=3) == []
        (letter,) = consume_all(settings, kafka.dlq_topic, 1)
        letter = json.loads(letter.value())
        assert letter["source_id"] == "till" and letter["contract"].startswith("checkouts/")

        assert 'collector_events_accepted_total{pipeline="web_events"} 1.0' in metrics
        assert 'collector_events_accepted_total{pipeline="mobile_app"} 1.0' in metrics
        assert 'collector_events_accepted_total{pipeline="till"} 0.0' in metrics
    finally:
        admin.delete_topics([spec.name for spec in topics])
