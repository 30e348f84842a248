"""The ledger's pending work: what a step produced that the next one has not taken yet.

Rows built by ``entry`` carry no ``consumed`` ids, as rows written before ids did
(they consumed what came before them in time); rows built by ``run`` name what they
consumed, as every step writes them now.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from batch_layer.ledger import Entry, Ledger, pending, pending_days
from core.settings import LakeSettings, Settings
from tests.support.web import WEB_EVENTS


def at(minute: int) -> datetime:
    return datetime(2024, 3, 1, minute // 60, minute % 60, tzinfo=UTC)


def day(n: int) -> date:
    return date(2024, 3, n)


def entry(step: str, minute: int, *days: int, passed: bool = True, **detail: object) -> Entry:
    """A ledger row of ``step`` recorded at ``at(minute)`` covering 2024-03-``days``."""
    days_ = tuple(day(n) for n in days)
    return Entry(step, f"{step}-{minute}", at(minute), days_, passed=passed, detail=detail)


def days(*numbers: int) -> tuple[date, ...]:
    return tuple(day(n) for n in numbers)


def test_an_empty_ledger_has_no_work():
    assert pending_days([], "silver", "gold") == ()


def test_before_the_first_downstream_run_everything_upstream_did_is_pending():
    log = [entry("silver", 1, 3, 1), entry("silver", 2, 2, 3)]
    assert pending_days(log, "silver", "gold") == days(1, 2, 3)


def test_days_the_downstream_step_took_are_no_longer_pending():
    log = [entry("silver", 1, 1, 2), entry("gold", 2, 1, 2), entry("silver", 3, 4)]
    assert pending_days(log, "silver", "gold") == days(4)
    assert pending_days([*log, entry("gold", 4, 4)], "silver", "gold") == ()


def test_a_rerun_of_a_day_makes_it_pending_again():
    log = [entry("silver", 1, 1), entry("gold", 2, 1), entry("silver", 3, 1)]
    assert pending_days(log, "silver", "gold") == days(1)


def test_a_downstream_run_with_no_days_still_marks_what_came_before_as_taken():
    # gold found nothing to do, but it ran after silver's day 1: the ledger moved on.
    log = [entry("silver", 1, 1), entry("gold", 2)]
    assert pending_days(log, "silver", "gold") == ()


def test_only_the_two_steps_asked_about_count():
    log = [
        entry("silver", 1, 1),
        entry("gate", 2, 1, stage="silver"),
        entry("gold", 3, 1),
        entry("gate", 4, 1, stage="gold"),
        entry("silver", 5, 2),
        entry("publish", 6, 1),
        entry("gold", 7, 2),
    ]
    assert pending_days(log, "silver", "gold") == ()
    assert pending_days(log, "gold", "publish") == days(2)


def test_time_decides_not_the_order_of_the_rows():
    log = [entry("silver", 1, 1), entry("gold", 5, 1), entry("silver", 9, 2), entry("silver", 3, 3)]
    shuffled = log[:]
    random.Random(7).shuffle(shuffled)
    assert pending_days(shuffled, "silver", "gold") == days(2)


def test_a_failed_upstream_row_produced_nothing():
    # A failed gate covered days 1 and 2; only the passed one after it counts.
    log = [
        entry("gate", 1, 1, 2, passed=False, stage="gold"),
        entry("gate", 2, 2, stage="gold"),
    ]
    assert pending_days(log, "gate", "publish") == days(2)


def test_a_failed_gate_in_between_leaves_silver_days_owed_to_gold():
    # The gate decides whether gold may run (gold.require_gate), not what it owes.
    log = [entry("silver", 1, 1), entry("gate", 2, 1, passed=False, stage="silver")]
    assert pending_days(log, "silver", "gold") == days(1)


def test_a_failed_downstream_row_still_counts_as_its_last_run():
    log = [entry("silver", 1, 1), entry("gate", 2, 1, passed=False), entry("silver", 3, 2)]
    assert pending_days(log, "silver", "gate") == days(2)


def test_the_ledger_lives_under_the_lake_per_pipeline(lake_settings: Settings):
    ledger = Ledger(None, lake_settings, WEB_EVENTS)  # type: ignore[arg-type]
    assert ledger.path == "s3a://acme-lake/prod/_pipelines/web_events/ledger"


def test_an_unknown_step_is_refused_before_anything_is_written(lake_settings: Settings):
    ledger = Ledger(None, lake_settings, WEB_EVENTS)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Unknown step 'bronze'; steps are \('silver', 'gold'"):
        ledger.append(entry("bronze", 1, 1))


def run(step: str, minute: int, *days_: int, took: tuple[Entry, ...] = (), **detail) -> Entry:
    """A ledger row written by today's steps: it names the entries it consumed."""
    row = entry(step, minute, *days_, **detail)
    return replace(row, consumed=tuple(e.entry_id for e in took))


def test_a_silver_run_recorded_while_gold_ran_stays_pending():
    # Gold read the ledger at minute 3 (silver day 1 pending), silver wrote day 2 at
    # minute 4, gold finished at minute 5: gold consumed day 1 only.
    s1 = run("silver", 1, 1)
    gate = run("gate", 2, 1, took=(s1,), stage="silver")
    s2 = run("silver", 4, 2)
    gold = run("gold", 5, 1, took=(s1,))
    log = [s1, gate, s2, gold]
    assert pending_days(log, "silver", "gold") == days(2)
    assert pending(log, "silver", "gold") == [s2]
    assert pending_days([*log, run("gold", 6, 2, took=(s2,))], "silver", "gold") == ()


def test_a_rerun_of_a_consumed_day_is_new_work():
    s1 = run("silver", 1, 1)
    log = [s1, run("gold", 2, 1, took=(s1,)), run("silver", 3, 1)]
    assert pending_days(log, "silver", "gold") == days(1)


def test_rows_written_before_ids_consumed_what_came_before_them():
    legacy = [entry("silver", 1, 1), entry("gold", 2, 1)]
    s3 = run("silver", 3, 2)
    assert pending_days([*legacy, s3], "silver", "gold") == days(2)
    assert pending_days([*legacy, s3, run("gold", 4, 2, took=(s3,))], "silver", "gold") == ()


def test_entry_ids_are_unique():
    assert entry("silver", 1, 1).entry_id != entry("silver", 1, 1).entry_id


def test_the_entries_a_process_remembers_are_those_a_fresh_read_gives(spark, tmp_path):
    from pyspark.sql import functions as F

    from batch_layer import ledger as ledger_module

    settings = Settings(lake=LakeSettings(root=str(tmp_path / "lake")))
    ledger = Ledger(spark, settings, WEB_EVENTS)
    silver = run("silver", 1, 1, 2, bronze_end={"0": 5}, rebuilt=[date(2024, 1, 2)])
    ledger.append(silver)
    assert [e.entry_id for e in ledger.entries()] == [silver.entry_id]
    ledger.append(run("gold", 2, 1, 2, took=(silver,), at=datetime(2024, 1, 3, tzinfo=UTC)))
    remembered = ledger.entries()  # no read: the append kept what was read, plus itself

    ledger_module._READ.clear()
    assert ledger.entries() == remembered
    assert remembered[1].detail == {"at": "2024-01-03 00:00:00+00:00"}  # as JSON keeps it

    # A row another process appended is seen at the next read: the log moved on.
    table = spark.read.format("delta").load(ledger.path)
    table.limit(1).withColumn("run_id", F.lit("elsewhere")).write.format("delta").mode(
        "append"
    ).save(ledger.path)
    assert [e.run_id for e in ledger.entries()].count("elsewhere") == 1
