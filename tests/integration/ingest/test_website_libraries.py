"""The real tracking libraries against the real stack: collector -> Kafka -> speed layer -> views.

Installed by the project's install step (``infra/local/npm`` pinned by its lock
file; Debian's Chromium; ``rudder-sdk-python`` from ``requirements/main.lock``):

- analytics-next in headless Chromium, from the demo shop page served on
  another origin (port) than the collector, loaded by the standard snippet
  (one request per call) and by ``AnalyticsBrowser.load({writeKey, cdnURL})``
  in batching mode; the page makes no request to any other host;
- RudderStack's JavaScript SDK in the same browser (its bundled build);
- ``rudder-sdk-python`` with its defaults (gzip bodies);
- Segment's Node library (``@segment/analytics-node``).

Each test finds its events in Kafka (enriched, each once) and in the live views.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from core.settings import LakeSettings, SpeedSettings
from platformctl.demo_site import headless_chromium, serve_site, visit
from tests.support.cassandra import SCHEMA_TIMEOUT_S
from tests.support.collector import collector_settings as make_settings
from tests.support.collector import consume_all, serve_collector
from tests.support.ports import free_port
from tests.support.web import WEB_EVENTS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

WRITE_KEY = "site-write-key-0001"


@pytest.fixture(scope="module")
def stack(spark, local_platform, tmp_path_factory):
    """A collector (the site's origin allowed) and the streaming speed layer, for this module."""
    from core.cassandra import connect, ensure_keyspace
    from layout import create_tables
    from speed_layer.job import start_queries

    name = f"t_web_{uuid.uuid4().hex[:8]}"
    site_port = free_port()
    root = tmp_path_factory.mktemp("website")
    settings = make_settings(
        local_platform,
        name,
        write_keys={"shop": WRITE_KEY},
        allowed_origins={"shop": [f"http://127.0.0.1:{site_port}"]},
    )
    settings = settings.model_copy(
        update={
            "cassandra": settings.cassandra.model_copy(update={"keyspace": name}),
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "ck")),
            "speed": SpeedSettings(
                trigger="1 second", starting_offsets="earliest", pipelines=["web_events"]
            ),
        }
    )
    cluster, session = connect(settings.cassandra)
    ensure_keyspace(session, name, {"class": "SimpleStrategy", "replication_factor": 1})
    create_tables(settings)
    with serve_collector(settings, WRITE_KEY) as collector:
        queries = start_queries(spark, settings, WEB_EVENTS)
        try:
            yield collector, site_port, session
        finally:
            for query in queries:
                query.stop()
            session.execute(f"DROP KEYSPACE IF EXISTS {name}", timeout=SCHEMA_TIMEOUT_S)
            cluster.shutdown()


def _events(collector, expected: int, run: str) -> list[dict]:
    """This run's events in the events topic (the topic holds every test's)."""
    deadline = time.monotonic() + 60
    while True:
        records = consume_all(collector.settings, collector.settings.kafka.events_topic, 10**6, 3)
        mine = [json.loads(r.value()) for r in records]
        mine = [e for e in mine if run in json.dumps(e)]
        if len({e["event_id"] for e in mine}) >= expected or time.monotonic() > deadline:
            return mine


def _check_enriched(events: list[dict], expected: int, library: str) -> None:
    ids = Counter(e["event_id"] for e in events)
    assert len(ids) == expected, f"{len(ids)} distinct events of {expected}: {sorted(ids)}"
    for event in events:
        assert event["event_id"] == event["messageId"]
        assert event["source_id"] == "shop"
        assert event["contract_version"]
        assert event["receivedAt"].endswith("Z") and event["timestamp"].endswith("Z")
        assert event["context"]["library"]["name"] == library
        assert "writeKey" not in event


def _view(session, keyspace: str, view: str, column: str, value: str, measure: str) -> int:
    rows = session.execute(f"SELECT {column}, {measure} FROM {keyspace}.speed_{view}")
    return sum(getattr(r, measure) for r in rows if getattr(r, column) == value)


def _wait_views(session, keyspace: str, expected: dict[tuple[str, str, str, str], int]) -> None:
    """Until each (view, key column, key, measure) reaches its count in the live views."""
    deadline = time.monotonic() + 180
    while True:
        seen = {k: _view(session, keyspace, *k) for k in expected}
        if seen == expected or time.monotonic() > deadline:
            assert seen == expected
            return
        time.sleep(2)


def _browse(tmp_path, collector, site_port, loader, delivery, run) -> list[str]:
    with (
        serve_site(
            collector.url, WRITE_KEY, port=site_port, loader=loader, delivery=delivery
        ) as site,
        headless_chromium(tmp_path / "chromium") as browser,
    ):
        visit(
            browser,
            site.url,
            paths=[f"/home-{run}", f"/boots-{run}"],
            searches=[f"boots {run}"],
            clicks=["add-boots"],
        )
        time.sleep(2)  # batching mode flushes after a second
        hosts = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
    return hosts


@pytest.mark.parametrize(
    ("loader", "delivery", "paths"),
    [("snippet", "default", ("/v1/p", "/v1/t")), ("npm", "batching", ("/v1/b",))],
)
def test_analytics_next_in_chromium_from_another_origin(
    stack, tmp_path, loader, delivery, paths
) -> None:
    collector, site_port, session = stack
    run = uuid.uuid4().hex[:8]
    requests = _browse(tmp_path, collector, site_port, loader, delivery, run)

    assert all(url.startswith(collector.url) for url in requests), requests
    assert any("/v1/projects/" in url and url.endswith("/settings") for url in requests)
    for path in paths:
        assert any(url == f"{collector.url}{path}" for url in requests), (path, requests)

    events = _events(collector, 4, run)
    _check_enriched(events, 4, "analytics.js")
    by_type = Counter(e["type"] for e in events if True)
    assert by_type["page"] >= 2 and by_type["track"] >= 2
    keyspace = collector.settings.cassandra.keyspace
    _wait_views(
        session,
        keyspace,
        {
            ("page_activity", "path", f"/home-{run}", "page_views"): 1,
            ("page_activity", "path", f"/boots-{run}", "page_views"): 1,
            ("search_terms", "query", f"boots {run}", "searches"): 1,
        },
    )
    clicks = [e for e in events if e.get("event") == "Element Clicked"]
    assert [c["properties"]["target"] for c in {c["event_id"]: c for c in clicks}.values()] == [
        "add-boots"
    ]


def test_rudderstack_javascript_sdk_in_chromium(stack, tmp_path, settings) -> None:
    collector, site_port, session = stack
    run = uuid.uuid4().hex[:8]
    bundle = (
        settings.local.state_dir
        / "npm/node_modules/@rudderstack/analytics-js/dist/npm/modern/bundled/umd/index.js"
    )
    assert bundle.exists(), f"{bundle} is missing: run `make install`"
    page = tmp_path / "rudder.html"
    page.write_text(
        f"""<!doctype html><html><head><title>Rudder page</title>
<script src="/rudder.js"></script>
<script>
  var sent = 0;
  const ra = new rudderanalytics.RudderAnalytics();
  ra.load("{WRITE_KEY}", "{collector.url}", {{configUrl: "{collector.url}", logLevel: "WARN"}});
  ra.ready(() => {{
    ra.page("Shop", "Rudder home", {{path: "/rudder-{run}"}});
    ra.track("Site Searched", {{query: "rudder {run}", results_count: 2}});
    document.getElementById("sent").textContent = "2";
  }});
</script></head><body><p id="sent">0</p></body></html>"""
    )
    extra = {"/rudder.html": page, "/rudder.js": bundle}
    with (
        serve_site(collector.url, WRITE_KEY, port=site_port, extra_files=extra) as site,
        headless_chromium(tmp_path / "chromium") as browser,
    ):
        browser.get(f"{site.url}/rudder.html")
        events = _events(collector, 2, run)
        requests = browser.execute_script(
            "return performance.getEntriesByType('resource').map(e => e.name)"
        )
    assert all(u.startswith((collector.url, site.url)) for u in requests), requests
    assert any(u.startswith(f"{collector.url}/sourceConfig/") for u in requests)
    _check_enriched(events, 2, "RudderLabs JavaScript SDK")
    _wait_views(
        session,
        collector.settings.cassandra.keyspace,
        {
            ("page_activity", "path", f"/rudder-{run}", "page_views"): 1,
            ("search_terms", "query", f"rudder {run}", "searches"): 1,
        },
    )


def test_rudder_sdk_python_with_its_defaults_gzips_and_delivers(stack) -> None:
    from rudderstack.analytics.client import Client

    collector, _, session = stack
    run = uuid.uuid4().hex[:8]
    client = Client(WRITE_KEY, host=collector.url, max_retries=2)
    assert client.gzip, "rudder-sdk-python compresses by default"
    failures: list[object] = []
    client.on_error = lambda error, _batch: failures.append(error)
    for _ in range(3):
        client.page(anonymous_id=f"py-{run}", name="Home", properties={"path": f"/py-{run}"})
    client.track(
        anonymous_id=f"py-{run}", event="Site Searched", properties={"query": f"python {run}"}
    )
    client.flush()
    client.join()
    assert failures == []
    _check_enriched(_events(collector, 4, run), 4, "analytics-python")
    _wait_views(
        session,
        collector.settings.cassandra.keyspace,
        {
            ("page_activity", "path", f"/py-{run}", "page_views"): 3,
            ("search_terms", "query", f"python {run}", "searches"): 1,
        },
    )


def test_segment_node_library_delivers(stack, settings) -> None:
    collector, _, session = stack
    run = uuid.uuid4().hex[:8]
    modules = settings.local.state_dir / "npm" / "node_modules"
    script = f"""
const {{ Analytics }} = require("@segment/analytics-node");
const analytics = new Analytics({{ writeKey: "{WRITE_KEY}", host: "{collector.url}",
                                   flushAt: 3, maxRetries: 2 }});
analytics.on("error", (err) => {{ console.error("delivery failed", err); process.exitCode = 1; }});
for (let n = 0; n < 2; n++) {{
  analytics.page({{ anonymousId: "node-{run}", name: "Home",
                   properties: {{ path: "/node-{run}" }} }});
}}
analytics.track({{ anonymousId: "node-{run}", event: "Site Searched",
                  properties: {{ query: "node {run}" }} }});
analytics.closeAndFlush({{ timeout: 20000 }}).then(() => console.log("flushed"));
"""
    result = subprocess.run(
        ["node", "-e", script],
        cwd=modules.parent,
        capture_output=True,
        text=True,
        timeout=60,
        env={"NODE_PATH": str(modules), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0 and "flushed" in result.stdout, result.stderr
    _check_enriched(_events(collector, 3, run), 3, "@segment/analytics-node")
    _wait_views(
        session,
        collector.settings.cassandra.keyspace,
        {
            ("page_activity", "path", f"/node-{run}", "page_views"): 2,
            ("search_terms", "query", f"node {run}", "searches"): 1,
        },
    )


def test_the_install_step_pinned_the_libraries_tested_here(settings) -> None:
    modules = settings.local.state_dir / "npm" / "node_modules"
    lock = json.loads(
        (Path(__file__).resolve().parents[3] / "infra/local/npm/package-lock.json").read_text()
    )
    for name in ("@segment/analytics-next", "@segment/analytics-node", "@rudderstack/analytics-js"):
        installed = json.loads((modules / name / "package.json").read_text())["version"]
        assert installed == lock["packages"][f"node_modules/{name}"]["version"]
