"""Clean traffic: users, their sessions and the Segment calls those sessions make.

Events arrive as a Poisson process at ``config.rate`` events per second of
the simulated clock. Each arrival belongs to one of up to ``rate *
think_time_s`` concurrent sessions (a new one starts when an empty slot is
drawn), so sessions interleave the way real visitors do. A session lands on a
page (external referrer: search engine, social, campaign or direct), then
views pages, clicks, searches and, for users with an account, identifies once;
a logged-in user's event is followed by a checkout (an ``Order Completed`` call)
at ``config.checkout_rate``.

Everything here is clean; :mod:`ingest.simulator.faults` breaks it on purpose.
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass
from typing import Any

from ingest.simulator.clock import to_ms
from ingest.simulator.config import SimulatorConfig
from ingest.simulator.site import Site

__all__ = [
    "CHECKOUT_CURRENCIES",
    "CHECKOUT_EVENT",
    "LIBRARY_VERSION",
    "Draft",
    "User",
    "build_users",
    "simulate_traffic",
]

LIBRARY_VERSION = "1.0.0"
"""Sent as ``context.library.version`` (``context.library.name`` is ``simulator``)."""

_END_SESSION = 0.2  # after each event: mean session length 5 events
_IDENTIFY = 0.15  # per event of a user with an account who has not identified yet
_MAX_LOAD_MS = 600_000
_USER_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0 Mobile Safari/537.36",
)
_LOCALES = ("en-US", "en-US", "en-GB", "de-DE", "fr-FR", "es-ES", "ja-JP", "pt-BR")
_SEARCH_ENGINES = ("https://www.google.com/", "https://www.bing.com/", "https://duckduckgo.com/")
_SOCIAL = ("https://t.co/", "https://www.linkedin.com/", "https://www.reddit.com/")
_CAMPAIGNS = (
    ("newsletter", "email", "spring_launch", "https://mail.example.net/"),
    ("google", "cpc", "brand_search", "https://www.google.com/"),
    ("linkedin", "paid_social", "data_teams", "https://www.linkedin.com/"),
)
_INTERNAL_ELEMENTS = ("a.nav-link", "a.card", "button.cta", "a.inline-link", "a.footer-link")
_EXTERNAL_TARGETS = (
    ("https://github.com/acme", "a.social-github"),
    ("https://twitter.com/acme", "a.social-twitter"),
    ("mailto:sales@example.com", "a.contact-sales"),
    ("#newsletter", "button#newsletter-signup"),
)
_PLANS = ("free", "free", "pro", "enterprise")
CHECKOUT_EVENT = "Order Completed"
"""The track event of a completed checkout (``SimulatorConfig.checkout_rate``)."""
CHECKOUT_CURRENCIES = ("EUR", "USD", "GBP")


@dataclass(frozen=True, slots=True)
class User:
    """One browser: its anonymousId, the account it may log into, its device."""

    anonymous_id: str
    user_id: str | None
    user_agent: str
    locale: str
    skew_ms: int
    """How far the device clock is off, in milliseconds (0 for most)."""


@dataclass(frozen=True, slots=True)
class Draft:
    """One clean event on its way to the wire (times in epoch milliseconds)."""

    seq: int
    emit_ms: int
    """When the client queues it for sending."""
    time_ms: int
    """When it happened (equals ``emit_ms`` unless the event is late)."""
    skew_ms: int
    body: dict[str, Any]
    defect: str | None = None


@dataclass(slots=True)
class _Session:
    user: int
    slot: int
    page: int | None = None
    path: str = ""
    title: str = ""
    url: str = ""
    referrer: str = ""
    search: str = ""
    campaign: dict[str, str] | None = None
    next_page: int | None = None


def build_users(config: SimulatorConfig) -> tuple[User, ...]:
    """The user population; skews come from their own random stream."""
    rng = random.Random(f"{config.seed}/users")
    skew_rng = random.Random(f"{config.seed}/skew")
    users = []
    for index in range(config.users):
        anonymous_id = _uuid(rng)
        known = rng.random() < config.known_user_rate
        skewed = skew_rng.random() < config.skewed_client_rate
        sign = 1 if skew_rng.random() < 0.5 else -1
        users.append(
            User(
                anonymous_id=anonymous_id,
                user_id=f"user-{index:06d}" if known else None,
                user_agent=rng.choice(_USER_AGENTS),
                locale=rng.choice(_LOCALES),
                skew_ms=sign * round(config.skew_s * 1000) if skewed else 0,
            )
        )
    return tuple(users)


def simulate_traffic(config: SimulatorConfig, site: Site, users: tuple[User, ...]) -> list[Draft]:
    """Clean events in the order they happen, until ``events`` or ``duration_s`` is reached."""
    rng = random.Random(f"{config.seed}/traffic")
    clock = float(to_ms(config.start))
    end = clock + config.duration_s * 1000 if config.duration_s is not None else math.inf
    limit = config.events if config.events is not None else math.inf
    concurrency = max(1, min(config.users, round(config.rate * config.think_time_s)))
    active: list[_Session] = []
    by_user: dict[int, _Session] = {}
    identified: set[int] = set()
    drafts: list[Draft] = []
    while len(drafts) < limit:
        clock += rng.expovariate(config.rate) * 1000
        if clock >= end:
            break
        slot = rng.randrange(concurrency)
        if slot < len(active):
            session = active[slot]
        else:
            user = rng.randrange(config.users)
            session = by_user.get(user) or _open(user, active, by_user)
        now = math.floor(clock)
        body = _next_call(rng, site, users[session.user], session, identified)
        if config.checkout_rate and _checks_out(rng, config, users[session.user], session.user,
                                                identified):  # fmt: skip
            drafts.append(Draft(len(drafts), now, now, users[session.user].skew_ms, body))
            body = _checkout(rng, users[session.user], session, identified)
            now += 1
        drafts.append(Draft(len(drafts), now, now, users[session.user].skew_ms, body))
        if rng.random() < _END_SESSION:
            _close(session, active, by_user)
    return drafts


def _open(user: int, active: list[_Session], by_user: dict[int, _Session]) -> _Session:
    session = _Session(user=user, slot=len(active))
    active.append(session)
    by_user[user] = session
    return session


def _close(session: _Session, active: list[_Session], by_user: dict[int, _Session]) -> None:
    last = active.pop()
    if last is not session:
        active[session.slot] = last
        last.slot = session.slot
    del by_user[session.user]


def _checks_out(
    rng: random.Random, config: SimulatorConfig, user: User, index: int, identified: set[int]
) -> bool:
    """Whether a logged-in user's event is followed by a completed checkout."""
    return user.user_id is not None and index in identified and rng.random() < config.checkout_rate


def _checkout(
    rng: random.Random, user: User, session: _Session, identified: set[int]
) -> dict[str, Any]:
    """The ``Order Completed`` call a site sends when a checkout completes (Segment's
    e-commerce spec): the order the checkout service records too, under the same id."""
    properties = {
        "order_id": f"o-{_uuid(rng).replace('-', '')[:16]}",
        "revenue_minor": rng.choice((999, 1999, 4999, 12900, 25800)),
        "currency": rng.choice(CHECKOUT_CURRENCIES),
    }
    return _call(rng, user, session, identified, "track", CHECKOUT_EVENT, properties)


def _next_call(
    rng: random.Random, site: Site, user: User, session: _Session, identified: set[int]
) -> dict[str, Any]:
    if session.page is None:
        return _landing(rng, site, user, session, identified)
    if user.user_id is not None and session.user not in identified and rng.random() < _IDENTIFY:
        identified.add(session.user)
        traits = {"email": f"{user.user_id}@example.org", "plan": rng.choice(_PLANS)}
        return _call(rng, user, session, identified, "identify", traits=traits)
    roll = rng.random()
    if roll < 0.6:
        target = session.next_page if session.next_page is not None else site.pick_page(rng)
        return _page_view(rng, site, user, session, identified, target, session.url, "")
    if roll < 0.85:
        if rng.random() < 0.7:
            session.next_page = site.pick_page(rng)
            target, element = site.pages[session.next_page].url, rng.choice(_INTERNAL_ELEMENTS)
        else:
            target, element = rng.choice(_EXTERNAL_TARGETS)
        properties = {"element": element, "target": target}
        return _call(rng, user, session, identified, "track", "Element Clicked", properties)
    term = site.terms[site.pick_term(rng)]
    properties = {"query": _as_typed(rng, term.text), "results_count": term.results}
    return _call(rng, user, session, identified, "track", "Site Searched", properties)


def _landing(
    rng: random.Random, site: Site, user: User, session: _Session, identified: set[int]
) -> dict[str, Any]:
    roll, search, referrer = rng.random(), "", ""
    if roll < 0.35:
        referrer = rng.choice(_SEARCH_ENGINES)
    elif roll < 0.5:
        referrer = rng.choice(_SOCIAL)
    elif roll < 0.65:
        source, medium, name, referrer = rng.choice(_CAMPAIGNS)
        session.campaign = {"name": name, "source": source, "medium": medium}
        search = f"?utm_source={source}&utm_medium={medium}&utm_campaign={name}"
    # else: direct traffic, no referrer
    target = site.pick_page(rng)
    return _page_view(rng, site, user, session, identified, target, referrer, search)


def _page_view(
    rng: random.Random,
    site: Site,
    user: User,
    session: _Session,
    identified: set[int],
    target: int,
    referrer: str,
    search: str,
) -> dict[str, Any]:
    page = site.pages[target]
    session.page, session.url = target, page.url + search
    session.path, session.title = page.path, page.title
    session.referrer, session.search, session.next_page = referrer, search, None
    load = rng.lognormvariate(math.log(page.load_median_ms), page.load_sigma)
    properties: dict[str, Any] = {
        "path": page.path,
        "url": session.url,
        "title": page.title,
        "referrer": referrer,
        "load_time_ms": min(_MAX_LOAD_MS, max(1, round(load))),
    }
    if search:
        properties["search"] = search
    return _call(rng, user, session, identified, "page", properties=properties, name=page.name)


def _call(
    rng: random.Random,
    user: User,
    session: _Session,
    identified: set[int],
    kind: str,
    event: str | None = None,
    properties: dict[str, Any] | None = None,
    *,
    traits: dict[str, Any] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"messageId": _uuid(rng), "type": kind}
    if event is not None:
        body["event"] = event
    if name is not None:
        body["name"] = name
    if user.user_id is not None and session.user in identified:
        body["userId"] = user.user_id
    body["anonymousId"] = user.anonymous_id
    if properties is not None:
        body["properties"] = properties
    if traits is not None:
        body["traits"] = traits
    body["context"] = _context(user, session)
    return body


def _context(user: User, session: _Session) -> dict[str, Any]:
    page = {
        "path": session.path,
        "referrer": session.referrer,
        "title": session.title,
        "url": session.url,
    }
    context: dict[str, Any] = {
        "page": page,
        "userAgent": user.user_agent,
        "locale": user.locale,
        "library": {"name": "simulator", "version": LIBRARY_VERSION},
    }
    if session.search:
        page["search"] = session.search
    if session.campaign is not None:
        context["campaign"] = dict(session.campaign)
    return context


def _as_typed(rng: random.Random, text: str) -> str:
    """The query as a person types it: case and spacing vary, the words do not."""
    roll = rng.random()
    if roll < 0.55:
        return text
    if roll < 0.75:
        return text.capitalize()
    if roll < 0.82:
        return text.upper()
    if roll < 0.9:
        return f"  {text} "
    return text.replace(" ", "  ") if " " in text else f"{text}\t"


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))
