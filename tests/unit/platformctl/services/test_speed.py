"""The speed layer's health, one view's progress row at a time (nothing started)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from platformctl.services.speed import view_progress_health


def test_speed_view_health_reports_a_watermark_ahead_of_now_as_an_error():
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    minute = timedelta(minutes=1)
    base = {"heartbeat_at": (now - timedelta(seconds=5)).replace(tzinfo=None), "kafka_lag": 0}
    poisoned = base | {
        "watermark": datetime(9999, 12, 31, 23, 49, 59),
        "max_event_time": datetime(9999, 12, 31, 23, 59, 59),
    }
    ok, text = view_progress_health("page_activity", poisoned, now, minute)
    assert not ok and "ERROR watermark 9999-12-31T23:49:59+00:00 is ahead of now" in text

    at_tolerance = base | {"watermark": (now + minute).replace(tzinfo=None)}
    assert view_progress_health("v", at_tolerance, now, minute)[0]

    healthy = base | {
        "watermark": (now - 10 * minute).replace(tzinfo=None),
        "max_event_time": (now - timedelta(seconds=3)).replace(tzinfo=None),
        "future_rows_dropped": 2,
    }
    ok, text = view_progress_health("v", healthy, now, minute)
    assert ok and "fresh 3s" in text and "future dropped 2" in text
    assert text.endswith("rejected 0")
    rejecting = healthy | {"rejected_rows": {"unparseable": 2, "missing:timestamp": 1}}
    text = view_progress_health("v", rejecting, now, minute)[1]
    assert text.endswith("rejected 3 (missing:timestamp 1, unparseable 2)")
    assert view_progress_health("v", None, now, minute) == (False, "v: no recent progress")


def test_a_view_with_no_micro_batch_yet_says_so_instead_of_none():
    now = datetime(2026, 11, 23, 12, tzinfo=UTC)
    beating = {"heartbeat_at": (now - timedelta(seconds=5)).replace(tzinfo=None), "kafka_lag": 0}
    ok, text = view_progress_health("orders_by_currency", beating, now, timedelta(minutes=1))
    assert ok and "None" not in text
    assert "fresh unknown" in text and "batch none yet" in text and "late dropped 0" in text
    ran = beating | {"batch_duration_ms": 812, "late_rows_dropped": 4}
    text = view_progress_health("v", ran, now, timedelta(minutes=1))[1]
    assert "batch 812ms" in text and "late dropped 4" in text
