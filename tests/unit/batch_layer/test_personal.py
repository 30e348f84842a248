"""Personal ids in step arguments: redacted where shown, scrubbed from what is logged."""

from __future__ import annotations

from batch_layer.personal import REDACTED, personal_values, redact_args, scrub, scrub_all


def test_every_form_of_the_user_option_is_redacted_and_nothing_else():
    argv = ["forget", "--pipeline", "web_events", "--user", "u-7", "--run-id", "r-1"]
    assert redact_args(argv) == [*argv[:4], REDACTED, "--run-id", "r-1"]
    assert redact_args(["forget", "--user=u-7"]) == ["forget", f"--user={REDACTED}"]
    assert redact_args(["forget", "--user"]) == ["forget", "--user"]  # no value to hide
    assert redact_args(["silver", "--dates", "2024-01-01"]) == ["silver", "--dates", "2024-01-01"]
    assert personal_values(["forget", "--user", "u-7", "--user=u-8"]) == ("u-7", "u-8")
    assert argv[4] == "u-7"  # the request's own arguments are left as they were


def test_an_id_is_scrubbed_as_a_whole_word_wherever_it_appears():
    text = 'user_id="ab-12" (ab-12) ab-123 xab-12 ab-12.'
    assert scrub(text, ["ab-12"]) == f'user_id="{REDACTED}" ({REDACTED}) ab-123 xab-12 {REDACTED}.'
    assert scrub("a+b*(c)", ["a+b*(c)"]) == REDACTED  # regex characters are literal
    assert scrub("nothing here", []) == "nothing here"


def test_every_string_of_a_summary_is_scrubbed():
    summary = {"steps": {"forget": {"failed": "no rows of u-7", "n": 3, "ids": ["u-7", "u-8"]}}}
    assert scrub_all(summary, ["u-7"]) == {
        "steps": {"forget": {"failed": f"no rows of {REDACTED}", "n": 3, "ids": [REDACTED, "u-8"]}}
    }
