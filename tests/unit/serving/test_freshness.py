"""The speed side's freshness as every answer reports it: sane figures or an explicit error."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from serving.freshness import (
    FreshnessRules,
    boundary_age_s,
    health_status,
    speed_freshness,
    unavailable,
    unavailable_span,
)
from serving.store import ViewPointers
from serving.timerange import HOUR_MS, to_ms

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
    freshness = {"clicks": {"status": "ok"}, "page_activity": fresh}
    old_boundary = {"clicks": 10 * 86400.0, "page_activity": None}  # the error wins
    assert health_status(freshness, old_boundary, RULES) == ("error", f"page_activity: {error}")


def test_health_is_ok_without_errors_and_with_young_or_no_boundaries() -> None:
    freshness = {"clicks": {"status": "unknown"}, "page_activity": {"status": "ok"}}
    ages = {"clicks": None, "page_activity": 86400.0}
    assert health_status(freshness, ages, RULES) == ("ok", None)


def test_a_boundary_older_than_allowed_degrades_health_naming_the_view() -> None:
    freshness = {"clicks": {"status": "ok"}, "page_activity": {"status": "ok"}}
    ages = {"clicks": 3600.0, "page_activity": 86400.5}
    assert health_status(freshness, ages, RULES) == (
        "degraded",
        "page_activity: the batch boundary is 86400 s old (more than 86400 s); speed rows "
        "expire after 259200 s, then windows after the boundary are unavailable until the "
        "batch layer publishes them",
    )


def test_boundary_age_is_never_negative() -> None:
    assert boundary_age_s(NOW - 90_500, NOW) == 90.5
    assert boundary_age_s(NOW + 5000, NOW) == 0
    assert boundary_age_s(None, NOW) is None


def test_windows_after_the_boundary_older_than_the_ttl_are_unavailable() -> None:
    ttl = RULES.speed_ttl_ms
    boundary = NOW - ttl - 2 * HOUR_MS
    assert unavailable_span(boundary, NOW, RULES) == (boundary, NOW - ttl)
    assert unavailable_span(NOW - ttl + 1, NOW, RULES) is None  # young boundary: all there
    assert unavailable_span(None, NOW, RULES) == (0, NOW - ttl)  # batch never ran: all speed
    said = unavailable(boundary, NOW, RULES, boundary - HOUR_MS, NOW)
    assert said == {
        "start": "2026-11-20T07:00:00Z",
        "end": "2026-11-20T09:00:00Z",
        "message": "Windows from 2026-11-20T07:00:00Z to 2026-11-20T09:00:00Z are unavailable, "
        "not zero: their speed rows are older than the speed TTL (259200 s) and may have "
        "expired, and the batch boundary is 2026-11-20T07:00:00Z, 266400 s old. They come back "
        "once the batch layer publishes them.",
    }
    assert unavailable(boundary, NOW, RULES, NOW - ttl, NOW) is None  # the range misses them
    assert unavailable(boundary, NOW, RULES, NOW - ttl - HOUR_MS, NOW)["start"] == (
        "2026-11-20T08:00:00Z"
    )


def test_the_tolerance_comes_from_the_event_time_settings() -> None:
    from core.settings import EventTimeSettings, ServingSettings, Settings, SpeedSettings

    settings = Settings(
        event_time=EventTimeSettings(future_tolerance_s=5.5),
        speed=SpeedSettings(ttl_s=7200),
        serving=ServingSettings(max_boundary_age_s=3600),
    )
    assert FreshnessRules.from_settings(settings) == FreshnessRules(
        future_tolerance_ms=5500, speed_ttl_ms=7_200_000, max_boundary_age_ms=3_600_000
    )
    assert ServingSettings().max_boundary_age_s < SpeedSettings().ttl_s


def test_health_judges_each_pipeline_on_its_own_views():
    """One pipeline's view ahead of now is that pipeline's error: the whole answer is
    degraded (200, the others serve); every pipeline in error is the whole answer's error."""
    from serving.freshness import health

    ok, ahead = {"status": "ok"}, {"status": "error", "error": "watermark ahead"}
    one = health({"page_activity": ahead, "orders_by_currency": ok}, {}, {}, RULES)
    assert one["status"] == "degraded" and one["error"] == "speed_event_time"
    assert one["pipelines"]["web_events"]["status"] == "error"
    assert one["pipelines"]["checkouts"] == {"status": "ok", "views": ["orders_by_currency"]}
    every = health({"page_activity": ahead, "orders_by_currency": ahead}, {}, {}, RULES)
    assert every["status"] == "error"
    assert health({"page_activity": ok}, {}, {}, RULES)["status"] == "ok"
