"""The Go load generator: its figures, as the serving benchmark prints them; bodies posted."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import loadgen
from bench.loadgen import summary


def test_a_phase_s_figures_come_from_its_measured_latencies():
    got = {
        "requests": 200,
        "errors": 3,
        "first_error": "EOF",
        "cache_hits": 150,
        "elapsed_s": 10.0,
        "latencies_ms": [float(i) for i in range(1, 201)],
    }
    result = summary("serving dashboard @20 (go)", got)
    assert result["rps"] == 20.0
    assert (result["p50_ms"], result["p99_ms"], result["max_ms"]) == (101.0, 199.0, 200.0)
    assert result["cache_hits"] == pytest.approx(0.75)
    assert (result["errors"], result["first_error"]) == (3, "EOF")


def test_a_phase_without_an_answer_has_no_rate_and_no_error_hidden():
    got = {"requests": 0, "errors": 5, "first_error": "connection refused",
           "cache_hits": 0, "elapsed_s": 2.0, "latencies_ms": []}  # fmt: skip
    result = summary("serving x (go)", got)
    assert result["rps"] == 0 and result["errors"] == 5
    assert result["first_error"] == "connection refused"


@pytest.mark.skipif(not loadgen.available(), reason="no Go toolchain to build the generator")
def test_bodies_are_posted_in_turn_with_the_headers_and_a_field_summed(tmp_path):
    seen: list[tuple[str, str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers["content-length"]))
            seen.append((self.path, self.headers["authorization"], body))
            answer = b'{"accepted": %d}' % len(body)
            self.send_response(200)
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        got = loadgen.drive(loadgen.binary(tmp_path), "127.0.0.1", server.server_port, "",
                            ["/v1/batch"], connections=1, rate=50, seconds=0.5, warmup=0,
                            headers={"Authorization": "Basic a2V5Og=="},
                            bodies=[b"x" * 3, b"\n" * 5], sum_field="accepted")  # fmt: skip
    finally:
        server.shutdown()
    assert got["errors"] == 0 and got["requests"] >= 4
    assert {path for path, _, _ in seen} == {"/v1/batch"}
    assert {auth for _, auth, _ in seen} == {"Basic a2V5Og=="}
    bodies = [body for _, _, body in seen]
    assert set(bodies) == {b"xxx", b"\n\n\n\n\n"}
    assert bodies[:2] in ([b"xxx", b"\n" * 5], [b"\n" * 5, b"xxx"])  # in turn
    measured = bodies[: got["requests"]]
    assert got["summed"] == sum(len(body) for body in measured)
