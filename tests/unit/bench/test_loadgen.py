"""The Go load generator's figures, as the serving benchmark prints them."""

from __future__ import annotations

import pytest

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
