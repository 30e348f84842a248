"""Each view over a small hand-made set of events, in both modes, against worked-out answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ingest.enrich import format_ts

pytestmark = pytest.mark.slow

T0 = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
M0, M1 = "2024-03-01T12:00:00Z", "2024-03-01T12:01:00Z"
SITE = "https://www.example.com"
GITHUB = "https://github.com/acme"


def _event(n: int, kind: str, second: float, who: str, **fields: Any) -> dict[str, Any]:
    """One event as the collector writes it (enriched, timestamp already corrected)."""
    at = format_ts(T0 + timedelta(seconds=second))
    row = {"event_id": f"e{n}", "messageId": f"e{n}", "type": kind, "anonymousId": who}
    row |= {k: v for k, v in fields.items() if v is not None}
    return row | {"timestamp": at, "receivedAt": at, "source_id": "t", "contract_version": "1.0.0"}


def _page(n, second, who, path, referrer, load=None, user=None, *, in_context=False):
    url = SITE + path
    page = {"path": path, "url": url}
    if referrer is not None:
        page["referrer"] = referrer
    properties = {} if in_context else dict(page)
    if load is not None:
        properties["load_time_ms"] = load
    context = {"page": page}
    return _event(n, "page", second, who, userId=user, properties=properties, context=context)


def _track(n, second, who, name, user=None, **properties):
    return _event(n, "track", second, who, userId=user, event=name, properties=properties)


# In three files of six, six and four events: every view is updated in two micro-batches.
EVENTS = [
    _page(1, 5, "a1", "/", "https://www.google.com/", load=100),  # session start
    _page(2, 20, "a1", "/docs", SITE + "/", load=300),
    _page(3, 30, "a2", "/", "", load=200, user="u2"),  # direct: session start; visitor u2
    _page(4, 40, "a2", "/", SITE + "/docs"),  # no userId: visitor a2; no load time
    _track(5, 50, "a1", "Element Clicked", element="a.social", target=GITHUB),
    _track(7, 10, "a1", "Site Searched", query="  Kafka   API ", results_count=3),
    _track(8, 15, "a2", "Site Searched", user="u2", query="kafka\tapi", results_count=3),
    _event(10, "identify", 65, "a2", userId="u2", traits={"plan": "pro"}),
    _page(11, 75, "a3", "/pricing", "https://docs.example.com/x", load=5000),  # other host
    _page(12, 78, "a4", "/blog", SITE + "/", load=50, in_context=True),  # path from context
    _track(13, 80, "a3", "Signed Up", plan="pro"),
    _track(6, 60, "a2", "Element Clicked", element="a.social", target=GITHUB),  # minute 1
    _page(14, 90, "a4", "/about", SITE + "/blog"),
    _page(15, 100, "a5", "/", None),  # no referrer at all: session start
    _track(16, 105, "a1", "Element Clicked", element="button"),  # no target: not a click
    _track(9, 70, "a1", "Site Searched", query="KAFKA", results_count=0),
]


def _loads(n, count, total, peak, p0=None, p50=None, p95=None, p100=None):
    return {
        "load_count": count,
        "load_sum": total,
        "load_max": peak,
        "load_sketch_n": n,
        "load_sketch_p0": p0,
        "load_sketch_p50": p50,
        "load_sketch_p95": p95,
        "load_sketch_p100": p100,
    }


LOADS_HOME = (100.0, 100.0, 200.0, 200.0)
"""Inclusive-rank p0, p50, p95, p100 of the two load times of "/" in minute 0."""

EXPECTED = {
    "page_activity": {
        (M0, "/"): {"page_views": 3, "visitors": 3} | _loads(2, 2, 300.0, 200.0, *LOADS_HOME),
        (M0, "/docs"): {"page_views": 1, "visitors": 1} | _loads(1, 1, 300.0, 300.0, *[300.0] * 4),
        (M1, "/pricing"): {"page_views": 1, "visitors": 1} | _loads(1, 1, 5e3, 5e3, *[5e3] * 4),
        (M1, "/blog"): {"page_views": 1, "visitors": 1} | _loads(1, 1, 50.0, 50.0, *[50.0] * 4),
        (M1, "/about"): {"page_views": 1, "visitors": 1} | _loads(0, 0, None, None),
        (M1, "/"): {"page_views": 1, "visitors": 1} | _loads(0, 0, None, None),
    },
    "site_activity": {
        (M0, "all"): {"events": 7, "page_views": 4, "sessions_started": 2, "visitors": 3},
        (M1, "all"): {"events": 9, "page_views": 4, "sessions_started": 2, "visitors": 6},
    },
    "search_terms": {(M0, "kafka api"): {"searches": 2}, (M1, "kafka"): {"searches": 1}},
    "clicks": {(M0, GITHUB): {"clicks": 1}, (M1, GITHUB): {"clicks": 1}},
}


@pytest.fixture(scope="module")
def hand_made_source(write_events, tmp_path_factory):
    """The hand-made events in three files (three micro-batches when streamed)."""
    return write_events(EVENTS, tmp_path_factory.mktemp("hand_made"))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_view_over_hand_made_events(name, mode, views_over, hand_made_source):
    assert views_over(mode, hand_made_source)[name] == EXPECTED[name]
