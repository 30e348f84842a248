"""A tiny local collector stand-in for the sender's tests (127.0.0.1, a free port)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass
class Received:
    """One request as the stand-in received it."""

    received_at: datetime
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeCollector:
    """Records every request; answers from ``script`` first, then 200 with the count."""

    url: str = ""
    requests: list[Received] = field(default_factory=list)
    script: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def answer(self, body: Any) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            if self.script:
                status, headers = self.script.pop(0)
                return status, headers, b'{"success": false}'
        batch = body.get("batch", []) if isinstance(body, dict) else []
        rejected = [
            {"index": i, "reason": "invalid:event"}
            for i, event in enumerate(batch)
            if not isinstance(event, dict)
        ]
        answer = {"success": True, "accepted": len(batch) - len(rejected), "rejected": rejected}
        return 200, {}, json.dumps(answer).encode()


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    """A running stand-in collector; its URL is ``collector.url``."""
    fake = FakeCollector()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the real collector

        def do_POST(self) -> None:
            received_at = datetime.now(UTC)
            raw = self.rfile.read(int(self.headers.get("content-length", "0")))
            body = json.loads(raw)
            with fake.lock:
                fake.requests.append(
                    Received(received_at, self.path, dict(self.headers.items()), body)
                )
            status, headers, payload = fake.answer(body)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
