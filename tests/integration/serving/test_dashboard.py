"""The live dashboard in headless Chromium (Debian's), while traffic flows through the platform.

Live simulated traffic goes into Kafka; the real speed layer streams it into
Cassandra; the serving app serves the page and the answers; the browser must
show numbers that change as events arrive, the chart with provisional and
final buckets and the batch boundary, and the freshness of the speed side.
Another pipeline's page is drawn from its views' measure kinds alone: the
checkouts rows published here must come back as its series, distinct counts
and percentiles. Screenshots are kept under ``.platform/artifacts/``.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import datasketches as ds
import httpx
import pytest

from core.settings import KafkaSettings, LakeSettings, Settings, SpeedSettings
from platformctl.demo_site import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS
from tests.support.web import WEB_EVENTS
from views.common import HLL_LG_K

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def live_traffic(spark, serving_settings: Settings, tmp_path_factory):
    """The speed layer streaming while simulated visitors arrive in real time."""
    from confluent_kafka.admin import AdminClient

    from ingest.simulator import SimulatorConfig, generate
    from ingest.simulator.direct import produce_direct
    from ingest.topics import ensure_topics, platform_topics
    from speed_layer.job import start_queries
    from speed_layer.progress import ProgressRecorder

    root = tmp_path_factory.mktemp("dashboard")
    topic = serving_settings.cassandra.keyspace.replace("_", "-")
    kafka = KafkaSettings(
        **serving_settings.kafka.model_dump()
        | {"events_topic": f"{topic}.events", "dlq_topic": f"{topic}.dlq", "partitions": 2}
        | {"suppressions_topic": f"{topic}.suppressions"}
    )
    settings = serving_settings.model_copy(
        update={
            "kafka": kafka,
            "lake": LakeSettings(root=str(root / "lake"), checkpoint_root=str(root / "ck")),
            "speed": SpeedSettings(
                trigger="1 second", starting_offsets="earliest", pipelines=["web_events"]
            ),
        }
    )
    admin = AdminClient(kafka.client_config())
    ensure_topics(admin, platform_topics(kafka))
    # freshness, as the speed layer's entry point does
    recorder = ProgressRecorder(settings, WEB_EVENTS.view_specs)
    listener = recorder.listener()
    spark.streams.addListener(listener)
    queries = start_queries(spark, settings, WEB_EVENTS)
    now = datetime.now(UTC)
    events = sorted(
        generate(SimulatorConfig(seed=3, events=None, duration_s=240, rate=25, start=now)),
        key=lambda e: e.sent_at,
    )
    stop = threading.Event()

    def send() -> None:  # each event when its time comes, as browsers would send them
        sent = 0
        while sent < len(events) and not stop.is_set():
            due = datetime.now(UTC)
            chunk = []
            while sent < len(events) and events[sent].sent_at <= due:
                chunk.append(events[sent])
                sent += 1
            if chunk:
                produce_direct(chunk, settings)
            stop.wait(0.5)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    yield settings
    stop.set()
    sender.join(30)
    for query in queries:
        query.stop()
    spark.streams.removeListener(listener)
    recorder.close()
    admin.delete_topics([kafka.events_topic, kafka.dlq_topic, kafka.suppressions_topic])


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "Debian's chromium and chromium-driver are missing: run `make install` "
        "(platformctl install provides them)."
    )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        *CHROMIUM_FLAGS,
        "--window-size=1400,1100",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def _number(driver, element_id: str) -> int | None:
    text = driver.find_element("id", element_id).text.replace(",", "").strip()
    return int(text) if text.isdigit() else None


def _wait(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"The dashboard did not {what} within {timeout_s:.0f}s.")


def _screenshot(browser, settings: Settings, name: str) -> Path:
    """The whole page (the window grown to its height) under ``.platform/artifacts/``."""
    artifacts = settings.local.state_dir / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, max(1100, height + 140))
    shot = artifacts / name
    browser.save_screenshot(str(shot))
    print(f"dashboard screenshot: {shot}")
    return shot


def test_the_dashboard_shows_live_numbers_that_change(
    live_traffic, serving_url, api_token, publish, browser, settings: Settings
) -> None:
    # A batch run published a boundary half an hour ago (no events before the traffic).
    boundary = datetime.now(UTC).replace(second=0, microsecond=0) - timedelta(minutes=30)
    publish("site_activity", [], boundary, days=[])

    browser.get(f"{serving_url}/dashboard#token={api_token}&every=2")
    first = _wait(lambda: _number(browser, "views-total"), 120, "show page views")
    _wait(lambda: (_number(browser, "views-total") or 0) > first, 60, "update its numbers")
    assert _number(browser, "events-now") is not None or _number(browser, "events-last")
    assert (_number(browser, "reach") or 0) > 0

    chart = browser.find_element("id", "chart")
    assert chart.find_elements("css selector", "rect.bucket.provisional")
    assert chart.find_elements("css selector", "rect.bucket.final")
    assert chart.find_elements("css selector", "rect.band.final")
    assert chart.find_elements("css selector", "rect.band.provisional")
    assert chart.find_elements("id", "boundary-line")
    assert "behind" in browser.find_element("id", "freshness").text
    assert boundary.strftime("%Y-%m-%d %H:%M") in browser.find_element("id", "boundary").text
    rows = browser.find_elements("css selector", "#top-pages tbody tr td.key")
    assert rows and rows[0].text.startswith("/")
    _wait(
        lambda: browser.find_elements("css selector", "#slowest tbody tr td.num"),
        30,
        "list the slowest pages",
    )
    assert int(browser.find_element("id", "updated").text) >= 2
    # The pipeline's views the web panel does not draw, drawn from their measures' kinds.
    for view in ("clicks", "search_terms"):
        assert browser.find_elements("css selector", f'#generic [data-view="{view}"]'), view
    assert browser.find_element("id", "error").text == ""

    shot = _screenshot(browser, settings, "dashboard.png")
    assert shot.stat().st_size > 10_000


def test_the_dashboard_asks_for_a_token_and_rejects_a_wrong_one(serving_url, browser) -> None:
    browser.get(f"{serving_url}/dashboard#token=wrong-token")
    _wait(lambda: browser.find_element("id", "login").is_displayed(), 10, "ask for a token")
    assert not browser.find_element("id", "app").is_displayed()


def test_the_dashboard_s_script_loads_nothing_from_elsewhere(serving_url: str) -> None:
    page = httpx.get(f"{serving_url}/dashboard").text
    script = httpx.get(f"{serving_url}/dashboard.js")  # no token, as the page
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert re.findall(r"<script[^>]*>", page) == ['<script src="dashboard.js">']
    assert "https://" not in script.text and "http://" not in script.text


CHECKOUTS_VIEW = "orders_by_currency"
PANEL_OF_KIND = {
    "count": "series",
    "sum": "series",
    "hll": "distinct",
    "kll": "percentiles",
    "max": "ranked",
    "min": "ranked",
}
"""The panel the page draws for a measure of each kind (and a ``keys`` table per keyed view)."""

_PANELS = """
return [...document.querySelectorAll('#generic [data-panel]')].map((c) => ({
  panel: c.dataset.panel, view: c.dataset.view, measure: c.dataset.measure || null,
  text: c.innerText,
  total: c.querySelector('[data-total]') ? Number(c.querySelector('[data-total]').dataset.total)
    : null,
  buckets: [...c.querySelectorAll('rect.bucket')].map((r) => ({start: r.dataset.start,
    value: r.dataset.value === '' ? null : Number(r.dataset.value),
    final: r.classList.contains('final')})),
  boundaries: c.querySelectorAll('line.boundary-line').length,
  head: [...c.querySelectorAll('thead th')].map((th) => th.textContent),
  rows: [...c.querySelectorAll('tbody tr')].map((tr) => [...tr.cells].map((td) => td.textContent)),
}));
"""
"""Every derived panel of the page at one instant (the page rebuilds them at each refresh)."""


def _hll(ids) -> bytes:
    sketch = ds.hll_sketch(HLL_LG_K, ds.tgt_hll_type.HLL_4)
    for i in ids:
        sketch.update(i)
    return sketch.serialize_compact()


def _kll(values) -> bytes:
    sketch = ds.kll_doubles_sketch(200)  # exact below 200 values
    for v in values:
        sketch.update(float(v))
    return sketch.serialize()


@dataclass(frozen=True)
class _Orders:
    """One minute of one currency's checkouts, as the view sums and sketches it."""

    at: datetime
    currency: str
    amounts: tuple[int, ...]
    refunded: tuple[int, ...]
    buyers: range

    def row(self) -> dict:
        return {
            "window_start": self.at,
            "currency": self.currency,
            "orders": len(self.amounts),
            "refunds": len(self.refunded),
            "revenue_minor": float(sum(self.amounts) - sum(self.refunded)),
            "buyers": _hll(f"{self.currency}-{i}" for i in self.buyers),
            "order_value": _kll(self.amounts),
        }


def _quantile(values, q: float) -> float:
    """Inclusive rank, as the KLL sketch answers while it holds every value."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _minute(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _shown(n: float | None) -> str:
    return "-" if n is None else f"{round(n):,}"


def _ready(panels: list[dict]) -> bool:
    tables = [p for p in panels if p["panel"] in ("keys", "distinct", "percentiles")]
    return bool(tables) and all(p["rows"] and len(p["rows"][0]) > 1 for p in tables)


def test_the_dashboard_shows_another_pipeline_s_views(
    serving_url, api_token, api, publish, write_speed, browser, settings: Settings
) -> None:
    """Checkouts' page, from its views' kinds alone: a series per count and sum measure (final
    and provisional buckets, the boundary), the keys' totals, distinct buyers with their
    error, order values' percentiles, each equal to what the published rows say."""
    boundary = datetime.now(UTC).replace(second=0, microsecond=0)
    at = [boundary - timedelta(minutes=10 - n) for n in range(10)]
    final = [  # many buyers in EUR: their estimate has an error to state
        _Orders(at[1], "EUR", (1250, 990, 4300), (500,), range(1200)),
        _Orders(at[2], "USD", (2100, 780), (), range(2)),
        _Orders(at[4], "EUR", (15999, 3100, 640, 2250), (), range(800, 2000)),
    ]
    provisional = [_Orders(boundary, "EUR", (1800, 420), (990,), range(1990, 2001))]
    publish(CHECKOUTS_VIEW, [o.row() for o in final], boundary)
    write_speed(CHECKOUTS_VIEW, [o.row() for o in provisional])
    orders = final + provisional

    browser.get(f"{serving_url}/dashboard#token={api_token}&pipeline=checkouts&every=2")
    panels = _wait(
        lambda: (found := browser.execute_script(_PANELS)) and _ready(found) and found,
        60,
        "show the checkouts' panels",
    )
    assert browser.find_element("id", "title").text == "checkouts, live"
    assert not browser.find_element("id", "web").is_displayed()
    assert browser.find_element("id", "error").text == ""

    # Which panels: one per measure, by its kind in /v1/views; nothing in the page names them.
    catalog = [v for v in api.get("/v1/views").json() if v["pipeline"] == "checkouts"]
    expected = {
        (PANEL_OF_KIND[m["kind"]], v["view"], m["name"]) for v in catalog for m in v["measures"]
    } | {("keys", v["view"], None) for v in catalog if v["constant_key"] is None}
    assert {(p["panel"], p["view"], p["measure"]) for p in panels} == expected
    source = httpx.get(f"{serving_url}/dashboard").text
    source += httpx.get(f"{serving_url}/dashboard.js").text
    names = {"checkouts", *(v["view"] for v in catalog)}
    names |= {m["name"] for v in catalog for m in v["measures"]}
    assert not [n for n in names if re.search(rf"\b{n}\b", source)]
    panel = {(p["panel"], p["measure"]): p for p in panels}

    # count and sum: every minute's value, final before the boundary, provisional after.
    for measure in ("orders", "refunds", "revenue_minor"):
        series = panel["series", measure]
        per_minute: dict[str, float] = defaultdict(float)
        for o in orders:
            per_minute[_minute(o.at)] += o.row()[measure]
        assert {b["start"]: b["value"] for b in series["buckets"] if b["value"]} == {
            start: value for start, value in per_minute.items() if value
        }, measure
        finals = {b["start"] for b in series["buckets"] if b["final"]}
        assert {_minute(o.at) for o in final} <= finals
        assert _minute(boundary) not in finals
        assert series["boundaries"] == 1, measure
        in_final = sum(o.row()[measure] for o in final)
        in_speed = sum(o.row()[measure] for o in provisional)
        assert series["total"] == in_final + in_speed
        assert (
            f"{_shown(in_final + in_speed)} in range: {_shown(in_final)} final, "
            f"{_shown(in_speed)} provisional"
        ) in series["text"]

    # The keys' totals over the range, ranked by the first count.
    keys = panel["keys", None]
    assert keys["head"] == ["currency", "orders", "refunds", "revenue_minor"]
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0.0])
    for o in orders:
        row = o.row()
        for i, measure in enumerate(("orders", "refunds", "revenue_minor")):
            totals[o.currency][i] += row[measure]
    assert keys["rows"] == [
        [currency, *map(_shown, values)]
        for currency, values in sorted(totals.items(), key=lambda kv: -kv[1][0])
    ]

    # hll: each currency's distinct buyers over the range, within the error the page states.
    distinct = {row[0]: row[1:] for row in panel["distinct", "buyers"]["rows"]}
    buyers: dict[str, set[int]] = defaultdict(set)
    for o in orders:
        buyers[o.currency] |= set(o.buyers)
    assert list(distinct) == sorted(buyers, key=lambda c: -len(buyers[c]))
    for currency, ids in buyers.items():
        estimate, error = distinct[currency]
        bounds = re.fullmatch(r"±[0-9.]+% \(([0-9,]+) to ([0-9,]+)\)", error)
        assert bounds, error
        lower, upper = (int(b.replace(",", "")) for b in bounds.groups())
        assert lower <= len(ids) <= upper and lower <= int(estimate.replace(",", "")) <= upper
    assert distinct["USD"][0] == "2"  # a few values: exact
    assert distinct["EUR"][1] != "±0.0% (2,001 to 2,001)"  # thousands: an estimate

    # kll: the percentiles the table heads name, of each currency's order values.
    percentiles = panel["percentiles", "order_value"]
    assert percentiles["head"][0] == "currency" and percentiles["head"][-1] == "values"
    quantiles = [float(label.removeprefix("p")) / 100 for label in percentiles["head"][1:-1]]
    assert quantiles == [0.5, 0.9, 0.99]
    amounts: dict[str, list[int]] = defaultdict(list)
    for o in orders:
        amounts[o.currency] += o.amounts
    assert percentiles["rows"] == [
        [currency, *(_shown(_quantile(values, q)) for q in quantiles), str(len(values))]
        for currency, values in sorted(amounts.items(), key=lambda kv: -_quantile(kv[1], 0.5))
    ]

    _screenshot(browser, settings, "dashboard-checkouts.png")


def test_an_idle_pipeline_is_idle_not_behind(
    serving_url, api_token, serving_settings: Settings, cql, browser
) -> None:
    """Kafka lag 0, a heartbeat of the speed query seconds ago, minutes after its newest event:
    nothing to read, so the old newest event is no lag. Forty seconds after it, a slow
    micro-batch (which beats at its end) cannot be told from a quiet minute: behind. With its
    heartbeat minutes old, the query may be down: behind."""
    from layout import PointerTables

    progress = cql.prepare(
        PointerTables(serving_settings.cassandra.keyspace).insert_progress(
            ("max_event_time", "heartbeat_at", "kafka_lag")
        )
    )
    pill = lambda: browser.find_element("id", "freshness")  # noqa: E731
    now = datetime.now(UTC)
    cql.execute(progress, (CHECKOUTS_VIEW, now - timedelta(minutes=14), now, 0))
    browser.get(f"{serving_url}/dashboard#token={api_token}&pipeline=checkouts&every=1")
    _wait(lambda: "idle" in pill().text, 30, "say the speed side is idle")
    assert "fresh-idle" in pill().get_attribute("class") and "behind" not in pill().text

    now = datetime.now(UTC)
    cql.execute(progress, (CHECKOUTS_VIEW, now - timedelta(seconds=40), now, 0))
    _wait(lambda: "behind" in pill().text, 30, "say a slow batch is behind")
    assert "fresh-slow" in pill().get_attribute("class")

    old = now - timedelta(minutes=5)
    cql.execute(progress, (CHECKOUTS_VIEW, now - timedelta(minutes=14), old, 0))
    _wait(lambda: "fresh-stale" in pill().get_attribute("class"), 30, "say the query is behind")
    beat = re.search(r"behind .*heartbeat ([0-9]+) s ago", pill().text)
    assert beat and 290 <= int(beat.group(1)) <= 400, pill().text


def test_each_analyst_s_dashboard_offers_only_the_pipelines_granted_to_their_team(
    serving_url, serving_settings, cql, browser
) -> None:
    """Two analysts of two teams, each with an issued token: the page offers each one the
    pipelines its team may read, and none of the other team's views."""
    import uuid

    from access.store import TokenStore

    store = TokenStore(cql, serving_settings.cassandra.keyspace)
    run = uuid.uuid4().hex[:6]
    offered = {}
    for who, team in (("web", "web-analytics"), ("shop", "shop-data")):
        token = store.issue(f"{who}-{run}", [team]).text
        time.sleep(serving_settings.access.refresh_s + 0.5)  # serving reads the new token
        browser.get("about:blank")  # a new page: another fragment alone would not reload it
        browser.get(f"{serving_url}/dashboard#token={token}&every=2")
        options = _wait(
            lambda: [o.text for o in browser.find_elements("css selector", "#pipeline option")],
            30,
            f"offer the {who} analyst a pipeline",
        )
        views = {
            e.get_attribute("data-view")
            for e in browser.find_elements("css selector", "table.pipeline-view")
        }
        offered[who] = (options, views, browser.find_element("id", "web").is_displayed())
        assert browser.find_element("id", "error").text == ""
    assert offered["web"][0] == ["web_events"] and offered["web"][2]
    assert offered["shop"][0] == ["checkouts"] and not offered["shop"][2]
    assert "orders_by_currency" not in offered["web"][1]
    assert not offered["shop"][1] & {"clicks", "search_terms", "page_activity", "site_activity"}
