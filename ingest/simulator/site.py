"""The simulated website: pages and search terms, each with a Zipf popularity.

Pages come in popularity order (``site.pages[0]``, the home page, is the most
viewed); a handful of them are deliberately slow, so "slowest pages" views
have a clear answer. Search terms come from a Zipf-distributed vocabulary too.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass

__all__ = ["BASE_URL", "Page", "SearchTerm", "Site", "build_site", "zipf_cumulative"]

BASE_URL = "https://www.example.com"
"""Origin of every simulated page URL."""

_BRAND = "Acme"
_HEAD = (
    ("/", "Home"),
    ("/pricing", "Pricing"),
    ("/docs", "Documentation"),
    ("/blog", "Blog"),
    ("/signup", "Sign up"),
    ("/login", "Log in"),
    ("/features", "Features"),
    ("/about", "About us"),
    ("/contact", "Contact"),
    ("/careers", "Careers"),
)
_SECTIONS = ("docs", "blog", "products", "help", "customers")
_WORDS = (
    "analytics", "api", "alerts", "billing", "cache", "cloud", "connector", "dashboard",
    "data", "deploy", "events", "export", "funnel", "gateway", "import", "insights",
    "kafka", "latency", "metrics", "migration", "mobile", "pipeline", "privacy", "query",
    "realtime", "reports", "retention", "schema", "security", "segments", "sessions", "sdk",
    "spark", "storage", "streaming", "teams", "tracking", "webhooks", "warehouse", "workflow",
)  # fmt: skip
_QUERY_EXTRA = (
    "how to", "pricing", "login", "reset password", "free trial", "setup", "example",
    "tutorial", "error", "limits", "integration", "vs", "best practices", "guide",
)  # fmt: skip
_SLOW_SHARE = 0.025
_MAX_SLOW = 8
_SEARCH_VOCABULARY = 300


@dataclass(frozen=True, slots=True)
class Page:
    """One page of the site and how fast it loads."""

    path: str
    title: str
    name: str
    load_median_ms: float
    """Median of the page's log-normal load time."""
    load_sigma: float
    """Sigma (spread) of the page's log-normal load time."""
    slow: bool
    """One of the deliberately slow pages."""

    @property
    def url(self) -> str:
        """Full URL of the page."""
        return BASE_URL + self.path


@dataclass(frozen=True, slots=True)
class SearchTerm:
    """A search term of the vocabulary and how many results it finds."""

    text: str
    results: int


@dataclass(frozen=True)
class Site:
    """Pages and search terms in popularity order, with their Zipf samplers."""

    pages: tuple[Page, ...]
    terms: tuple[SearchTerm, ...]
    page_cumulative: tuple[float, ...]
    term_cumulative: tuple[float, ...]

    def pick_page(self, rng: random.Random) -> int:
        """Index of a page drawn by popularity."""
        return _pick(rng, self.page_cumulative)

    def pick_term(self, rng: random.Random) -> int:
        """Index of a search term drawn by popularity."""
        return _pick(rng, self.term_cumulative)


def zipf_cumulative(n: int, exponent: float) -> tuple[float, ...]:
    """Cumulative Zipf weights ``sum(1 / k**exponent for k <= i)`` for ranks 1..n."""
    if n < 1:
        raise ValueError(f"a Zipf law needs at least one rank, got n={n}")
    return tuple(itertools.accumulate(1.0 / k**exponent for k in range(1, n + 1)))


def build_site(seed: int, pages: int = 200, zipf_exponent: float = 1.1) -> Site:
    """Build the site for ``seed``: the same seed always gives the same pages and terms."""
    rng = random.Random(f"{seed}/site")
    paths = _page_paths(rng, pages)
    n_slow = min(_MAX_SLOW, max(1, round(pages * _SLOW_SHARE)))
    # Slow pages get real traffic: pick them among ranks 4..60, not in the long tail.
    candidates = list(range(3, min(pages, 60))) or list(range(pages))
    slow = set(rng.sample(candidates, min(n_slow, len(candidates))))
    built = []
    for rank, (path, name) in enumerate(paths):
        is_slow = rank in slow
        median = rng.uniform(3500.0, 9000.0) if is_slow else rng.uniform(250.0, 1400.0)
        sigma = rng.uniform(0.5, 0.7) if is_slow else rng.uniform(0.3, 0.6)
        title = name if path == "/" else f"{name} | {_BRAND}"
        built.append(Page(path, title, name, median, sigma, is_slow))
    terms = _vocabulary(rng)
    return Site(
        pages=tuple(built),
        terms=terms,
        page_cumulative=zipf_cumulative(len(built), zipf_exponent),
        term_cumulative=zipf_cumulative(len(terms), zipf_exponent),
    )


def _pick(rng: random.Random, cumulative: tuple[float, ...]) -> int:
    return min(bisect.bisect_right(cumulative, rng.random() * cumulative[-1]), len(cumulative) - 1)


def _page_paths(rng: random.Random, pages: int) -> list[tuple[str, str]]:
    head = list(_HEAD[:pages])
    seen = {path for path, _ in head}
    tail: list[tuple[str, str]] = []
    while len(head) + len(tail) < pages:
        section = rng.choice(_SECTIONS)
        words = rng.sample(_WORDS, rng.randint(1, 3))
        path = f"/{section}/{'-'.join(words)}"
        if path not in seen:
            seen.add(path)
            tail.append((path, " ".join(words).capitalize()))
    rng.shuffle(tail)
    return head + tail


def _vocabulary(rng: random.Random) -> tuple[SearchTerm, ...]:
    texts = list(_WORDS) + [f"{a} {b}" for a in _WORDS for b in _QUERY_EXTRA]
    rng.shuffle(texts)
    terms = []
    for text in texts[:_SEARCH_VOCABULARY]:
        found = 0 if rng.random() < 0.1 else max(1, round(rng.lognormvariate(math.log(40), 1.0)))
        terms.append(SearchTerm(text, found))
    return tuple(terms)
