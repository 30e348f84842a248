"""``platformctl status``: the speed line says what the last reconciliation found."""

from __future__ import annotations

from platformctl.services.speed import describe_reconciliation

AT = 1_795_000_000_000


def test_passed_reconciliations_are_summed_up():
    ok = {"checked_at": AT, "windows_compared": 60, "windows_differing": 0, "passed": True}
    older = ok | {"checked_at": AT - 60_000, "windows_compared": 40}
    assert describe_reconciliation({"clicks": ok, "site_activity": older}) == (
        "reconciled 2026-11-18 11:06 UTC: 100 windows, 0 differing"
    )


def test_a_drifting_view_is_named():
    bad = {
        "checked_at": AT,
        "windows_compared": 60,
        "windows_differing": 2,
        "passed": False,
        "largest_at": "2026-11-18T10:00:00Z ('/',) only in batch",
    }
    ok = {"checked_at": AT, "windows_compared": 60, "windows_differing": 0, "passed": True}
    assert describe_reconciliation({"page_activity": bad, "clicks": ok}) == (
        "DRIFT page_activity: 2 of 60 windows differ from batch (largest: "
        "2026-11-18T10:00:00Z ('/',) only in batch); docs/operations.md"
    )


def test_nothing_reconciled_says_nothing():
    assert describe_reconciliation({"clicks": None}) == ""
