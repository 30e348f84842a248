"""Derived pipelines' declarations: what is refused at import and at ``validate_all()``."""

from __future__ import annotations

import sys
import types
from importlib.resources import files

import pytest

from pipelines import DERIVED, PIPELINES, DerivedSpec, Input, derived_pipeline, validate_all
from pipelines.derived_checks import check_derived, derived_problems

CONTRACTS = files("pipelines").parent / "data_contracts"


def a_derived(name="visits", *inputs: Input, **kwargs) -> DerivedSpec:
    kwargs = {"contract": "web_sessions", "contract_major": 1, "day": "session_date"} | kwargs
    return DerivedSpec(name=name, inputs=inputs or (Input("web_events"),), **kwargs)


@pytest.mark.parametrize(
    ("make", "error"),
    [
        (lambda: DerivedSpec("v", "c", 1, (), day="d"), "at least one input"),
        (lambda: a_derived("v", Input("v")), "names itself as an input"),
        (lambda: a_derived("v", Input("a"), Input("a")), r"inputs more than once: \['a'\]"),
        (lambda: Input("web_events", reach_days=-1), "reach_days is a whole number"),
        (lambda: a_derived("v", identity="user_id"), r"identity is a tuple"),
    ],
)
def test_a_declaration_that_cannot_run_is_refused_when_it_is_made(make, error):
    with pytest.raises((ValueError, TypeError), match=error):
        make()


def test_an_input_that_is_no_pipeline_is_refused_with_the_fix():
    spec = a_derived("visits", Input("web_event"), transform="web_sessions")
    _, problems = check_derived((spec,), PIPELINES, CONTRACTS)
    names = ", ".join(sorted([*(p.name for p in PIPELINES), "visits"]))
    assert problems == [
        f"derived pipeline 'visits' reads 'web_event', which is no declared pipeline (pipelines: "
        f"{names}): declare it, or fix Input('web_event') in pipelines/declared/visits.py"
    ]


def test_derived_pipelines_that_read_each_other_in_a_circle_are_refused():
    a = a_derived("a", Input("c"), transform="web_sessions")
    b = a_derived("b", Input("a"), transform="web_sessions")
    c = a_derived("c", Input("b"), Input("web_events"), transform="web_sessions")
    _, problems = check_derived((a, b, c), PIPELINES, CONTRACTS)
    assert len(problems) == 1 and "in a circle: a -> c -> b -> a" in problems[0]


def test_each_derived_pipeline_comes_after_those_it_reads():
    first = a_derived("first", transform="web_sessions")
    second = a_derived("second", Input("first"), transform="web_sessions")
    ordered, problems = check_derived((second, first), PIPELINES, CONTRACTS)
    assert (problems, [d.name for d in ordered]) == ([], ["first", "second"])


def test_a_name_already_taken_a_missing_contract_or_module_and_an_unknown_team_are_refused():
    spec = a_derived("checkouts", contract="visits", transform="visits", owner="growth")
    _, problems = check_derived((spec,), PIPELINES, CONTRACTS)
    assert [p.split(":")[0] for p in problems] == [
        "pipeline name 'checkouts' is declared 2 times",
        "derived pipeline 'checkouts' names team 'growth' (owner=), which is not declared in "
        "pipelines/teams.py (teams",
        "derived pipeline 'checkouts' names contract visits v1, but data_contracts/visits/"
        "v1.odcs.yaml does not exist",
        "derived pipeline 'checkouts' is built by derived/visits.py, which does not exist",
    ]


@pytest.fixture
def transform(monkeypatch):
    """``transform(reads)``: a module ``derived.fake`` reading ``reads``, for one test."""

    def make(reads):
        module = types.ModuleType("derived.fake")
        module.READS = reads
        module.build = lambda inputs: None
        monkeypatch.setitem(sys.modules, "derived.fake", module)
        return a_derived("visits", transform="fake", identity=("visitor_id",))

    return make


def test_a_transformation_reading_what_its_contract_does_not_declare_is_refused(transform):
    spec = transform({"web_events": ("anonymousId", "traits", "context.ip", "context.page")})
    problems = derived_problems((spec,), PIPELINES)
    assert [p.split(",")[0] for p in problems] == [
        "derived pipeline 'visits' reads web_events.context.ip",
        "derived pipeline 'visits' reads web_events.traits",
    ]
    assert "customProperties personalInputs" in problems[0]


def test_a_transformation_must_read_its_inputs_and_only_columns_they_hold(transform):
    spec = transform({"checkouts": ("order_id",), "web_events": ("anonymousId", "payload")})
    problems = derived_problems((spec,), PIPELINES)
    assert problems[0].startswith(
        "derived pipeline 'visits': derived/fake.py reads ['checkouts', 'web_events'] but the "
        "declaration's inputs are ['web_events']"
    )
    assert problems[1].startswith("derived pipeline 'visits' reads ['payload'] of 'web_events'")


def test_identity_must_be_restricted_and_the_day_a_date_of_the_contract(transform):
    spec = transform({"web_events": ("anonymousId",)})
    wrong = DerivedSpec(**{**spec.__dict__, "identity": ("landing_page",), "day": "started_at"})
    problems = derived_problems((wrong,), PIPELINES)
    assert [p.split(":")[1].strip() for p in problems] == [
        "identity field 'landing_page' must be a field of web-sessions/1.0.0 classified "
        "restricted (SQL hides it, forget finds the person by it)",
        "its day column 'started_at' must be a date field of web-sessions/1.0.0 (logicalType",
    ]


def test_the_shipped_derived_pipelines_validate():
    assert validate_all() is PIPELINES
    assert derived_problems(DERIVED, PIPELINES) == []
    assert derived_pipeline("web_sessions").input_names == ("web_events",)
    with pytest.raises(KeyError, match=r"the derived pipelines are: .*web_sessions"):
        derived_pipeline("nope")
