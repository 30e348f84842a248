"""Gold's gate rule (no Spark): gold and publish only run past a passed, fresh gate."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from batch_layer.gold import GateNotPassed, gold_path, require_gate
from batch_layer.ledger import Entry, pending_days
from core.settings import Settings
from views import view


def entry(step: str, minute: int, *days: int, passed: bool = True, **detail: object) -> Entry:
    """A ledger row of ``step`` at 00:``minute`` covering 2024-03-``days``."""
    return Entry(
        step,
        f"{step}-{minute}",
        datetime(2024, 3, 1, 0, minute, tzinfo=UTC),
        tuple(date(2024, 3, n) for n in days),
        passed=passed,
        detail=detail,
    )


def gate(minute: int, stage: str, passed: bool = True) -> Entry:
    return entry("gate", minute, passed=passed, stage=stage, report=f"/reports/{stage}-{minute}.md")


def test_a_passed_gate_after_the_step_lets_the_next_one_run():
    require_gate([entry("silver", 1, 1), gate(2, "silver")], "silver", "silver")


def test_nothing_to_guard_before_the_step_ever_ran():
    require_gate([], "silver", "silver")


def test_no_gate_at_all_says_which_check_to_run():
    with pytest.raises(GateNotPassed, match="has not run since the last silver run; run the "):
        require_gate([entry("silver", 1, 1)], "silver", "silver")


def test_a_gate_older_than_the_step_does_not_count():
    log = [entry("silver", 1, 1), gate(2, "silver"), entry("silver", 3, 2)]
    with pytest.raises(GateNotPassed, match="run the check_silver step first"):
        require_gate(log, "silver", "silver")


def test_a_failed_gate_names_its_run_and_report():
    log = [entry("gold", 1, 1), gate(2, "gold", passed=False)]
    failed = r"gold quality gate failed \(run gate-2\); see /reports/gold-2.md"
    with pytest.raises(GateNotPassed, match=failed):
        require_gate(log, "gold", "gold")


def test_the_latest_gate_decides():
    passed_then_failed = [entry("gold", 1, 1), gate(2, "gold"), gate(3, "gold", passed=False)]
    with pytest.raises(GateNotPassed, match="failed"):
        require_gate(passed_then_failed, "gold", "gold")
    failed_then_passed = [entry("gold", 1, 1), gate(2, "gold", passed=False), gate(3, "gold")]
    require_gate(failed_then_passed, "gold", "gold")


def test_a_gate_of_the_other_stage_does_not_count():
    log = [entry("silver", 1, 1), gate(2, "silver"), entry("gold", 3, 1), gate(4, "silver")]
    with pytest.raises(GateNotPassed, match="gold quality gate has not run"):
        require_gate(log, "gold", "gold")
    require_gate(log, "silver", "silver")


def test_a_day_travels_the_ledger_as_each_step_would_read_it():
    """Silver -> gate -> gold -> gate -> publish, with a failed gate and a rerun on the way."""
    log: list[Entry] = [entry("silver", 1, 1, 2)]
    assert pending_days(log, "silver", "gold") == (date(2024, 3, 1), date(2024, 3, 2))
    log.append(gate(2, "silver", passed=False))
    with pytest.raises(GateNotPassed):
        require_gate(log, "silver", "silver")  # gold refuses
    log += [entry("silver", 3, 2), gate(4, "silver")]  # day 2 reprocessed, gate passes
    require_gate(log, "silver", "silver")
    assert pending_days(log, "silver", "gold") == (date(2024, 3, 1), date(2024, 3, 2))
    log.append(entry("gold", 5, 1, 2))
    assert pending_days(log, "silver", "gold") == ()
    assert pending_days(log, "gold", "publish") == (date(2024, 3, 1), date(2024, 3, 2))
    with pytest.raises(GateNotPassed):
        require_gate(log, "gold", "gold")  # publish refuses: no gold gate yet
    log += [gate(6, "gold"), entry("publish", 7, 1, 2)]
    require_gate(log, "gold", "gold")
    assert pending_days(log, "gold", "publish") == ()


def test_gold_tables_are_named_after_their_view(lake_settings: Settings):
    assert gold_path(lake_settings, view("clicks")) == "s3a://acme-lake/prod/gold/clicks"


def took(row: Entry, *upstream: Entry) -> Entry:
    return replace(row, consumed=tuple(e.entry_id for e in upstream))


def test_a_gate_that_did_not_check_a_silver_run_does_not_let_gold_read_it():
    # check_silver read the ledger with day 1 pending; silver wrote day 2 before the
    # gate's row landed. The gate is newer than both, but it checked day 1 only.
    s1, s2 = took(entry("silver", 1, 1)), took(entry("silver", 2, 2))
    log = [s1, s2, took(gate(3, "silver"), s1)]
    with pytest.raises(GateNotPassed, match="run the check_silver step first"):
        require_gate(log, "silver", "silver")
    require_gate([*log, took(gate(4, "silver"), s1, s2)], "silver", "silver")


def test_after_gold_consumed_a_silver_run_only_the_newer_one_needs_the_gate():
    s1, s2 = took(entry("silver", 1, 1)), took(entry("silver", 4, 2))
    log = [s1, took(gate(2, "silver"), s1), s2, took(entry("gold", 5, 1), s1)]
    assert pending_days(log, "silver", "gold") == (date(2024, 3, 2),)
    with pytest.raises(GateNotPassed):
        require_gate(log, "silver", "silver")
    require_gate([*log, took(gate(6, "silver"), s2)], "silver", "silver")
