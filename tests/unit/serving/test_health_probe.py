"""The SQL server's health probe: one query at a time, a stuck one abandoned.

The Connect query is replaced by a function of this test (the probe's own logic is what is
tested here; the real ``SELECT 1`` is exercised by the SQL server's integration tests).
"""

from __future__ import annotations

import threading

from serving.connect import health
from serving.connect.health import HealthProbe


def _probe(monkeypatch, answers: list) -> tuple[HealthProbe, list[threading.Event]]:
    """A probe whose n-th query does ``answers[n]``: a float answers, "hang" blocks until
    released (the events returned, one per hanging query)."""
    released: list[threading.Event] = []
    calls = iter(answers)

    def ask(self) -> float:
        answer = next(calls)
        if answer == "hang":
            event = threading.Event()
            released.append(event)
            event.wait(30)
            return 0.0
        return answer

    monkeypatch.setattr(health._Asker, "ask", ask)
    monkeypatch.setattr(health._Asker, "drop_session", lambda self: None)
    return HealthProbe("sc://nowhere:1", timeout_s=0.3), released


def test_an_answer_in_time_is_answering(monkeypatch):
    probe, _ = _probe(monkeypatch, [0.01])
    answer = probe.check()
    assert answer.answering and answer.seconds == 0.01


def test_one_stuck_query_fails_one_check_and_the_next_asks_again(monkeypatch):
    probe, released = _probe(monkeypatch, ["hang", 0.02])
    try:
        first = probe.check()
        assert not first.answering and "did not answer within 0.3 s" in first.error
        second = probe.check()  # the stuck query is abandoned: a new one answers
        assert second.answering and second.seconds == 0.02
    finally:
        for event in released:
            event.set()


def test_a_query_younger_than_the_limit_is_waited_for_not_repeated(monkeypatch):
    """Two checks while a query runs share it (no pile of queries on a slow server)."""
    probe, released = _probe(monkeypatch, ["hang", 0.5])
    results = []
    checks = [threading.Thread(target=lambda: results.append(probe.check())) for _ in range(2)]
    for check in checks:
        check.start()
    for check in checks:
        check.join(5)
    try:
        assert len(results) == 2 and not any(r.answering for r in results)
        assert len(released) == 1, "the second check started a query of its own"
    finally:
        for event in released:
            event.set()


def test_a_driver_that_answers_nobody_fails_every_check(monkeypatch):
    probe, released = _probe(monkeypatch, ["hang", "hang", "hang"])
    try:
        assert [probe.check().answering for _ in range(3)] == [False, False, False]
    finally:
        for event in released:
            event.set()


def test_a_failed_query_is_an_error_not_a_timeout(monkeypatch):
    def ask(self):
        raise RuntimeError("INVALID_HANDLE.SESSION_CLOSED\nat somewhere")

    monkeypatch.setattr(health._Asker, "ask", ask)
    monkeypatch.setattr(health._Asker, "drop_session", lambda self: None)
    answer = HealthProbe("sc://nowhere:1", timeout_s=1).check()
    assert not answer.answering and answer.error == "SELECT 1 failed: INVALID_HANDLE.SESSION_CLOSED"
