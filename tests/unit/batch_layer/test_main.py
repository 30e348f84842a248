"""``python -m batch_layer``: parsing --dates and the command line, up to where Spark starts."""

from __future__ import annotations

from datetime import date

import pytest

import batch_layer.runner as runner
import batch_layer.steps as steps
from batch_layer.cli import main, parse_dates
from batch_layer.runner import run_step
from batch_layer.steps import MAINTENANCE, THROUGH_PUBLISH


def test_a_single_day():
    assert parse_dates("2024-02-29") == [date(2024, 2, 29)]


def test_a_list_is_sorted_and_deduplicated():
    assert parse_dates("2024-01-05, 2024-01-01,2024-01-05,") == [date(2024, 1, 1), date(2024, 1, 5)]


def test_a_range_is_inclusive_and_crosses_months_and_leap_days():
    days = parse_dates("2024-02-27..2024-03-02")
    assert days == [date(2024, 2, d) for d in (27, 28, 29)] + [date(2024, 3, 1), date(2024, 3, 2)]


def test_a_range_of_one_day():
    assert parse_dates("2024-01-01..2024-01-01") == [date(2024, 1, 1)]


def test_ranges_and_days_mix_and_overlaps_count_once():
    days = parse_dates("2024-01-02..2024-01-04,2024-01-03..2024-01-05, 2024-01-01")
    assert days == [date(2024, 1, n) for n in range(1, 6)]


def test_spaces_around_the_range_dots_are_ignored():
    assert parse_dates("2024-01-01 .. 2024-01-02") == [date(2024, 1, 1), date(2024, 1, 2)]


def test_a_reversed_range_is_refused():
    with pytest.raises(ValueError, match=r"2024-01-03\.\.2024-01-01 ends before it starts"):
        parse_dates("2024-01-03..2024-01-01")


@pytest.mark.parametrize("text", ["2024-13-01", "yesterday", "2024-01-01..", "01/02/2024"])
def test_what_is_not_a_date_is_refused(text: str):
    with pytest.raises(ValueError):
        parse_dates(text)


@pytest.mark.parametrize("text", ["", " ", ",", " , "])
def test_no_dates_at_all_is_refused(text: str):
    # An empty list would make silver rebuild nothing yet record bronze as seen.
    with pytest.raises(ValueError, match="No dates"):
        parse_dates(text)


def test_help_lists_every_step_and_exits_zero(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for step in (*THROUGH_PUBLISH, "reconcile", "all", *MAINTENANCE, "forget"):
        assert step in out
    text = " ".join(out.split())
    assert "exit code is 0 on success, 3 when a quality gate failed" in text
    assert "4 when the speed and batch views disagree" in text
    assert (runner.EXIT_GATE_FAILED, runner.EXIT_DRIFT) == (3, 4)
    assert steps.ALL[-1] == "reconcile" and steps.ALL[:-1] == THROUGH_PUBLISH


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["silver", "--pipeline", "nope"], "argument --pipeline: invalid choice: 'nope'"),
        (["reprocess"], "invalid choice: 'reprocess'"),
        ([], "the following arguments are required: step"),
        (
            ["silver", "--dates", "2024-01-03..2024-01-01"],
            "argument --dates: Date range 2024-01-03..2024-01-01 ends before it starts.",
        ),
        (["silver", "--dates", "2024-13-01"], "argument --dates: month must be in 1..12"),
        (["silver", "--dates", ","], "argument --dates: No dates in ','."),
        (["forget", "--pipeline", "web_events"], "forget needs --user ID"),
    ],
)
def test_usage_errors_exit_2_before_any_spark_and_say_what_was_wrong(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err, err
    if "--dates" in argv:
        assert "YYYY-MM-DD" in err


def test_run_step_refuses_an_unknown_step():
    with pytest.raises(ValueError, match="Unknown step 'nope'"):
        run_step(None, None, "nope", None, "run", None)


def test_run_step_forget_needs_the_user():
    with pytest.raises(ValueError, match="needs the user to forget"):
        run_step(None, None, "forget", None, "run", None)
