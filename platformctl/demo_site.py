"""The demo website: a shop page tracked with analytics.js, and a headless browser visiting it.

The page (``static/shop.html``) uses the standard analytics.js snippet with
the collector as its only host: analytics.js, its settings document and the
events all come from or go to the collector. It is served here from another
origin (its own port), as a real website would be, and visited by Debian's
Chromium through chromedriver: page views, searches typed into the form and
clicks on buttons.

    with serve_site("http://127.0.0.1:8088", "local-dev-write-key") as site:
        with headless_chromium(profile_dir) as browser:
            visit(browser, site.url, paths=["/boots"], searches=["boots"], clicks=["add-boots"])
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CHROMEDRIVER",
    "CHROMIUM",
    "CHROMIUM_FLAGS",
    "ShopVisit",
    "Site",
    "browse_shop",
    "headless_chromium",
    "serve_site",
    "visit",
]

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
_PAGE = Path(__file__).with_name("static") / "shop.html"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@dataclass(frozen=True)
class Site:
    url: str
    """``http://127.0.0.1:<port>``: the site's origin."""


@contextmanager
def serve_site(
    collector_url: str,
    write_key: str,
    *,
    port: int = 0,
    loader: Literal["snippet", "npm"] = "snippet",
    delivery: Literal["default", "batching"] = "default",
    extra_files: dict[str, Path] | None = None,
) -> Iterator[Site]:
    """Serve the shop page at every path (its path is the page view's) on ``port``.

    ``extra_files``: further files by URL path (a test page, another library's bundle).
    """
    page = (
        _PAGE.read_text()
        .replace("__COLLECTOR__", collector_url.rstrip("/"))
        .replace("__WRITE_KEY__", write_key)
        .replace("__LOADER__", loader)
        .replace("__DELIVERY__", delivery)
        .encode()
    )
    files = dict(extra_files or {})

    class Handler(BaseHTTPRequestHandler):
        timeout = 10  # seconds per read of a request: a half-sent one is dropped

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path in files:
                body = files[path].read_bytes()
                kind = "text/html" if path.endswith(".html") else "application/javascript"
            elif path == "/favicon.ico":
                self.send_error(404)
                return
            else:
                body, kind = page, "text/html"
            self.send_response(200)
            self.send_header("content-type", f"{kind}; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Site(f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def headless_chromium(profile_dir: Path) -> Iterator[Any]:
    """Debian's Chromium under chromedriver (selenium), with a fresh profile in ``profile_dir``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        raise RuntimeError(
            "Debian's chromium and chromium-driver are missing: run `make install` "
            "(platformctl install provides them)."
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, "--window-size=1200,900", f"--user-data-dir={profile_dir}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def visit(
    browser: Any,
    site_url: str,
    *,
    paths: Sequence[str],
    searches: Sequence[str] = (),
    clicks: Sequence[str] = (),
    timeout_s: float = 30,
) -> int:
    """Open each of ``paths``; on the last, search each query and click each button id.

    Waits until analytics.js reports every call sent (the page counts them);
    returns the number of calls made.
    """
    calls = 0
    for n, path in enumerate(paths):
        browser.get(f"{site_url}{path}")
        calls += 1
        if n == len(paths) - 1:
            _wait_sent(browser, 1, timeout_s)
            for query in searches:
                field = browser.find_element("id", "query")
                field.clear()
                field.send_keys(query)
                browser.find_element("id", "search-button").click()
                calls += 1
            for button in clicks:
                browser.find_element("id", button).click()
                calls += 1
        _wait_sent(browser, 1 if n < len(paths) - 1 else 1 + len(searches) + len(clicks), timeout_s)
    return calls


def _wait_sent(browser: Any, expected: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = browser.find_element("id", "sent").text.strip()
        if text.isdigit() and int(text) >= expected:
            return
        time.sleep(0.2)
    logs = ""
    with contextlib.suppress(Exception):  # the console log is a nicety of the message
        logs = "; ".join(e["message"] for e in browser.get_log("browser"))[-2000:]
    raise RuntimeError(
        f"analytics.js did not send {expected} calls within {timeout_s:.0f}s at "
        f"{browser.current_url}; browser console: {logs or 'empty'}"
    )


@dataclass(frozen=True)
class ShopVisit:
    """What the demo's browser did on the shop page: its calls and what they were about."""

    calls: int
    paths: tuple[str, ...]
    searches: tuple[str, ...]
    clicks: tuple[str, ...]
    order: str
    """The ``order_id`` of the visit's "Order Completed" call (custom properties)."""


def browse_shop(collector_url: str, write_key: str, profile_dir: Path) -> ShopVisit:
    """Visit the demo shop in headless Chromium: page views, two searches, two clicks, an order."""
    run = f"{int(time.time()) % 100_000:05d}"
    paths = (f"/shop/{run}/home", f"/shop/{run}/boots")
    searches = (f"winter boots {run}", f"wool socks {run}")
    clicks = ("add-boots", "add-socks")
    with (
        serve_site(collector_url, write_key) as site,
        headless_chromium(profile_dir) as browser,
    ):
        buttons = (*clicks, "checkout")
        calls = visit(browser, site.url, paths=paths, searches=searches, clicks=buttons)
    return ShopVisit(calls, paths, searches, clicks, order=f"order-{run}")
