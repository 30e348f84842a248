"""Which windows a reconciliation compares: closed in both layers, still held, not yet compared."""

from __future__ import annotations

from datetime import UTC, date, datetime

from batch_layer.ledger import Entry
from batch_layer.reconcile import _plan, _previous_ends, windows_to_compare
from layout import Boundary

MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
D = date(2026, 11, 23)
D0 = int(datetime(2026, 11, 23, tzinfo=UTC).timestamp() * 1000)


def plan(**given):
    args = {
        "previous_end": None,
        "days_published": [D],
        "boundary": D0 + 10 * HOUR,
        "closed_until": D0 + 10 * HOUR,
        "held_from": 0,
    }
    return windows_to_compare(**(args | given))


def test_the_first_run_starts_at_the_first_day_published_and_ends_at_the_boundary():
    assert plan() == [(D0, D0 + 10 * HOUR)]


def test_a_later_run_resumes_where_the_last_passed_one_ended():
    assert plan(previous_end=D0 + 9 * HOUR, days_published=[]) == [(D0 + 9 * HOUR, D0 + 10 * HOUR)]


def test_windows_not_closed_in_both_layers_wait_for_the_next_run():
    # The speed watermark (or the batch cut less the watermark delay) before the boundary.
    assert plan(closed_until=D0 + 9 * HOUR + 30 * MINUTE + 15_000) == [
        (D0, D0 + 9 * HOUR + 30 * MINUTE)
    ]
    assert plan(previous_end=D0 + 10 * HOUR, days_published=[]) == []


def test_windows_whose_speed_rows_may_have_expired_or_precede_the_floor_are_left_out():
    assert plan(held_from=D0 + 2 * HOUR + 1) == [(D0 + 2 * HOUR + MINUTE, D0 + 10 * HOUR)]


def test_nothing_without_a_boundary_or_a_speed_watermark():
    assert plan(boundary=None) == []
    assert plan(closed_until=None) == []
    assert plan(days_published=[]) == []


def test_days_a_forget_republished_are_left_out():
    two_days = plan(days_published=[D], boundary=D0 + DAY + 2 * HOUR, closed_until=D0 + DAY * 2)
    assert two_days == [(D0, D0 + DAY + 2 * HOUR)]
    skipped = plan(
        days_published=[D],
        boundary=D0 + DAY + 2 * HOUR,
        closed_until=D0 + DAY * 2,
        skip_days=[D],
    )
    assert skipped == [(D0 + DAY, D0 + DAY + 2 * HOUR)]


def test_the_next_run_resumes_at_what_both_layers_closed():
    boundary = Boundary(datetime.fromtimestamp((D0 + 10 * HOUR) / 1000, UTC), 1, "r", None)
    ranges, resume, note = _plan(boundary, D0 + 9 * HOUR, D0 + 12 * HOUR, None, {D}, 0, set())
    assert ranges == [(D0, D0 + 9 * HOUR)] and resume == D0 + 9 * HOUR and note == ""
    ranges, resume, note = _plan(boundary, None, D0 + 12 * HOUR, D0 + HOUR, {D}, 0, set())
    assert ranges == [] and resume == D0 + HOUR
    assert note == "the speed layer reports no watermark for this view"
    _, _, note = _plan(None, D0, D0, None, {D}, 0, set())
    assert note == "the batch layer never published this view"


def test_only_passed_runs_move_the_resume_point():
    def run(resume: int, passed: bool, minute: int) -> Entry:
        at = datetime(2026, 11, 23, 12, minute, tzinfo=UTC)
        detail = {"views": {"clicks": {"resume_at": resume}}}
        return Entry("reconcile", f"r{minute}", at, (D,), passed=passed, detail=detail)

    entries = [run(D0 + HOUR, True, 1), run(D0 + 2 * HOUR, False, 2)]
    assert _previous_ends(entries) == {"clicks": D0 + HOUR}
