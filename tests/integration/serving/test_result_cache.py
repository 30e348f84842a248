"""Shared answers never outlive the pointers they were computed from, over real HTTP.

A client polls one question as a dashboard does while the batch layer publishes a new
version (a final answer) or the speed layer writes a micro-batch and its progress (a
provisional answer). Identical requests are answered from the cache, and every request
sent later than the worker's pointer cache time after the change sees the new rows.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

pytestmark = pytest.mark.integration

POINTER_CACHE_S = 1.0
SERVING = {"pointer_cache_s": POINTER_CACHE_S}
SPEED_TTL_S = 10 * 365 * 24 * 3600
"""The speed rows of 2024 are kept (and served as speed) for this module's questions."""
T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
BOUNDARY = T0 + timedelta(hours=2)
MINUTES = [T0 + timedelta(minutes=i) for i in range(180)]
MARGIN_S = 0.5
"""Time for one pointer read and one answer after the pointer cache time has run out."""


def _clicks(minutes, per_minute: int) -> list[dict]:
    return [{"window_start": m, "target": "/signup", "clicks": per_minute} for m in minutes]


def _poll(api, params: dict, seconds: float, change) -> tuple[list[tuple], float]:
    """Ask ``params`` over and over for ``seconds``, calling ``change()`` half way;
    returns ``(sent, value, cache)`` per answer and when ``change()`` returned."""
    answers, changed_at = [], None
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if changed_at is None and time.monotonic() - start > seconds / 2:
            change()
            changed_at = time.monotonic()
        sent = time.monotonic()
        answer = api.get("/v1/top", params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        answers.append((sent, body["items"][0]["value"], body["cache"]))
        time.sleep(0.02)
    assert changed_at is not None
    return answers, changed_at


def _settled(api, params: dict) -> dict:
    """The answer once the worker's pointers include what the test just wrote (a request
    after the pointer cache time starts their re-read: serving.store.ServingStore.pointers)."""
    time.sleep(POINTER_CACHE_S)
    api.get("/v1/top", params=params)
    time.sleep(MARGIN_S)
    answer = api.get("/v1/top", params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _check(answers, changed_at: float, old: int, new: int) -> None:
    before = [(value, cache) for sent, value, cache in answers if sent < changed_at - 0.05]
    after = [value for sent, value, _ in answers if sent > changed_at + POINTER_CACHE_S + MARGIN_S]
    assert before and after
    assert {value for value, _ in before} == {old}
    assert any(cache["hit"] for _, cache in before), "identical requests were not shared"
    assert all(cache["age_s"] <= 30 for _, cache in before)
    assert set(after) == {new}, "an answer outlived the pointers it was computed from"


def test_a_publish_during_polling_is_seen_within_the_pointer_cache_time(publish, api) -> None:
    publish("clicks", _clicks(MINUTES[:120], 1), BOUNDARY)
    params = {
        "view": "clicks",
        "measure": "clicks",
        "start": T0.isoformat(),
        "end": BOUNDARY.isoformat(),
    }
    first = _settled(api, params)
    assert first["final"] is True and first["items"][0]["value"] == 120

    answers, changed_at = _poll(
        api, params, 6.0, lambda: publish("clicks", _clicks(MINUTES[:120], 3), BOUNDARY)
    )
    _check(answers, changed_at, old=120, new=360)


def test_a_speed_micro_batch_during_polling_is_seen_within_the_pointer_cache_time(
    write_speed, api, cql, serving_settings
) -> None:
    progress = cql.prepare(
        f"INSERT INTO {serving_settings.cassandra.keyspace}.speed_progress "
        "(view_name, max_event_time, watermark, heartbeat_at) VALUES (?, ?, ?, ?)"
    )
    speed_minutes = MINUTES[120:]

    def micro_batch(per_minute: int, watermark: datetime) -> None:
        # As the speed layer does: the micro-batch's rows (windows at or after the watermark
        # it ran with), then its progress; windows that end before a watermark never change.
        write_speed("clicks", _clicks(speed_minutes, per_minute), batch_id=per_minute)
        cql.execute(progress, ("clicks", speed_minutes[-1], watermark, datetime.now(UTC)))

    micro_batch(2, watermark=speed_minutes[0])
    params = {
        "view": "clicks",
        "measure": "clicks",
        "start": BOUNDARY.isoformat(),
        "end": (BOUNDARY + timedelta(hours=1)).isoformat(),
    }
    first = _settled(api, params)
    assert first["final"] is False and first["items"][0]["value"] == 120

    answers, changed_at = _poll(api, params, 6.0, lambda: micro_batch(4, speed_minutes[-1]))
    _check(answers, changed_at, old=120, new=240)


def test_metrics_count_the_answers_shared(api) -> None:
    api.get("/v1/top", params={"view": "clicks", "measure": "clicks", "start": "now-5m"})
    text = api.get("/metrics").text
    samples = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line.startswith("wap_serving_cache_")
    }
    assert samples['wap_serving_cache_lookups{cache="answers",how="cached"}'] > 0
    assert samples['wap_serving_cache_lookups{cache="answers",how="computed"}'] > 0
    assert samples['wap_serving_cache_entries{cache="answers"}'] >= 1
