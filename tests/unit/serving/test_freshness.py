"""The speed side's freshness as every answer reports it: sane figures or an explicit error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from serving.freshness import FreshnessRules, health_status, speed_freshness
from serving.store import ViewPointers
from serving.timerange import to_ms

NOW = to_ms(datetime(2026, 11, 23, 9, 0, tzinfo=UTC))
YEAR_9999 = to_ms(datetime(9999, 12, 31, 23, 49, 59, tzinfo=UTC))
RULES = FreshnessRules(future_tolerance_ms=60_000)


def test_lag_is_now_minus_the_newest_event_time() -> None:
    fresh = speed_freshness(
        ViewPointers(None, newest_event=NOW - 2500, watermark=NOW - 600_000, kafka_lag=3),
        NOW,
        RULES,
    )
    assert fresh == {
        "status": "ok",
        "newest_event_time": "2026-11-23T08:59:57.500Z",
        "lag_s": 2.5,
        "watermark": "2026-11-23T08:50:00Z",
        "heartbeat_at": None,
        "kafka_lag": 3,
    }


def test_a_clock_a_little_ahead_is_no_lag_never_a_negative_one() -> None:
    fresh = speed_freshness(ViewPointers(None, newest_event=NOW + 59_000), NOW, RULES)
    assert fresh["status"] == "ok" and fresh["lag_s"] == 0


def test_no_progress_yet_is_unknown() -> None:
    fresh = speed_freshness(ViewPointers(None), NOW, RULES)
    assert fresh["status"] == "unknown" and fresh["lag_s"] is None


@pytest.mark.parametrize(
    ("pointers", "error"),
    [
        (
            ViewPointers(None, newest_event=NOW, watermark=YEAR_9999),
            "watermark 9999-12-31T23:49:59Z is ahead of now; "
            "reset the speed layer (docs/operations.md)",
        ),
        (
            ViewPointers(None, newest_event=NOW + 61_000, watermark=NOW - 600_000),
            "newest event time 2026-11-23T09:01:01Z is ahead of now; "
            "reset the speed layer (docs/operations.md)",
        ),
        (
            ViewPointers(None, newest_event=2**62),
            f"newest event time {2**62} ms after 1970-01-01T00:00:00Z is ahead of now; "
            "reset the speed layer (docs/operations.md)",
        ),
    ],
)
def test_event_time_ahead_of_now_beyond_the_tolerance_is_an_error(pointers, error) -> None:
    fresh = speed_freshness(pointers, NOW, RULES)
    assert fresh["status"] == "error" and fresh["lag_s"] is None
    assert fresh["error"] == error
    assert health_status({"clicks": {"status": "ok"}, "page_activity": fresh}) == (
        "error",
        f"page_activity: {error}",
    )


def test_health_is_ok_without_errors() -> None:
    assert health_status({"clicks": {"status": "unknown"}, "page": {"status": "ok"}}) == (
        "ok",
        None,
    )


def test_the_tolerance_comes_from_the_event_time_settings() -> None:
    from core.settings import EventTimeSettings, Settings

    settings = Settings(event_time=EventTimeSettings(future_tolerance_s=5.5))
    assert FreshnessRules.from_settings(settings).future_tolerance_ms == 5500
