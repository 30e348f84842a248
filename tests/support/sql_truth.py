"""The ground truth of the docs' example queries, computed from the events sent into the
published lake (:mod:`tests.support.lake`): what the SQL server, the notebook and the lake's
direct readers must answer."""

from __future__ import annotations

from collections import Counter, defaultdict
from urllib.parse import urlparse

from ingest.simulator import build_truth
from tests.support.lake import BOT_UA

__all__ = [
    "devices",
    "funnel",
    "human",
    "referrers",
    "retention",
    "top_pages",
    "visitors_by_campaign",
]


def human(event) -> bool:
    return event.payload["context"].get("userAgent") != BOT_UA


def top_pages(events) -> list[list]:
    views = Counter()
    for minute in build_truth(events).page_views.values():
        views.update(minute)
    ranked = sorted(views.items(), key=lambda item: (-item[1], item[0]))[:10]
    return [[path, count] for path, count in ranked]


def visitors_by_campaign(valid) -> list[list]:
    visitors, counts = defaultdict(set), Counter()
    for e in filter(human, valid):
        campaign = e.payload["context"].get("campaign")
        if campaign:
            key = (campaign["name"], campaign["source"], campaign["medium"])
            visitors[key].add(e.payload["anonymousId"])
            counts[key] += 1
    rows = [[*key, len(visitors[key]), counts[key]] for key in visitors]
    return sorted(rows, key=lambda row: (-row[3], row[0]))


def funnel(valid) -> list[list]:
    humans = list(filter(human, valid))
    viewed = {}
    for e in humans:
        if e.payload["type"] == "page":
            who = e.payload["anonymousId"]
            viewed[who] = min(viewed.get(who, e.time), e.time)
    searched = {
        e.payload["anonymousId"]
        for e in humans
        if e.payload["type"] == "track"
        and e.payload.get("event") == "Site Searched"
        and e.payload["anonymousId"] in viewed
        and e.time > viewed[e.payload["anonymousId"]]
    }
    return [[len(viewed), len(searched)]]


def retention(valid) -> list[list]:
    days = defaultdict(set)
    for e in filter(human, valid):
        days[e.payload["anonymousId"]].add(e.time.date())
    counts = Counter()
    for seen in days.values():
        cohort = min(seen)
        counts.update((cohort.isoformat(), (day - cohort).days) for day in seen)
    return [[cohort, n, count] for (cohort, n), count in sorted(counts.items())]


def referrers(valid) -> dict[str, int]:
    hosts = Counter()
    for e in filter(human, valid):
        referrer = e.payload["context"].get("page", {}).get("referrer")
        if e.payload["type"] == "page" and referrer and urlparse(referrer).hostname:
            hosts[urlparse(referrer).hostname] += 1
    return dict(hosts)


def devices(valid) -> dict[tuple, int]:
    from serving.connect.user_agents import describe

    counts = Counter()
    for e in valid:
        ua = describe(e.payload["context"].get("userAgent") or "")
        counts[(ua.device_type, ua.browser, ua.os, ua.is_bot)] += 1
    return dict(counts)
