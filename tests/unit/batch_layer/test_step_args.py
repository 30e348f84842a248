"""A step request's arguments are checked by the CLI's own parser, raising where it would exit."""

from __future__ import annotations

from datetime import date

import pytest

from batch_layer.cli import parse_step_args
from batch_layer.steps import ALL


def test_a_request_gets_the_cli_defaults():
    argv = ["silver", "--pipeline", "checkouts", "--dates", "2024-03-01..2024-03-02"]
    args = parse_step_args(argv, raising=True)
    assert (args.pipeline, args.steps) == ("checkouts", ("silver",))
    assert args.dates == [date(2024, 3, 1), date(2024, 3, 2)]
    assert args.run_id.startswith("manual__")
    assert parse_step_args(["all", "--pipeline", "web_events"], raising=True).steps == ALL


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nonsense"], "invalid choice: 'nonsense'"),
        (["silver", "--pipeline", "nope"], "invalid choice: 'nope'"),
        (["silver", "--dates", "2024-03-02..2024-03-01"], "ends before it starts"),
        (["forget", "--pipeline", "web_events"], "forget needs --user ID"),
        # No pipeline is the default one: each step names the declared pipeline it runs.
        (["silver"], "the following arguments are required: --pipeline"),
        ([], "the following arguments are required: step"),
    ],
)
def test_a_bad_request_raises_the_cli_message(argv, message):
    with pytest.raises(ValueError, match=message):
        parse_step_args(argv, raising=True)


def test_the_cli_still_exits_on_a_bad_argument():
    with pytest.raises(SystemExit):
        parse_step_args(["nonsense"])
