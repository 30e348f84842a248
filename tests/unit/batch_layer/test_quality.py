"""The gold suite derived from each view, and the gate's report (no Spark: nothing is validated).

Building a suite imports Great Expectations (several seconds of CPU), so those
tests are marked ``slow``; ``-m "not slow"`` runs the rest in a moment.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from batch_layer.quality import GateReport, suite_result, view_suite
from core.settings import Settings
from data_contracts.derive import ExpectationFailure, ValidationSummary
from tests.support.web import WEB_VIEWS
from views import ViewSpec, view


def _by_type(spec: ViewSpec) -> dict[str, list]:
    found: dict[str, list] = defaultdict(list)
    for expectation in view_suite(spec).expectations:
        found[expectation.expectation_type].append(expectation)
    return found


def _columns(expectations: list) -> set[str]:
    return {e.column for e in expectations}


@pytest.mark.slow
def test_page_activity_suite():
    suite = view_suite(view("page_activity"))
    assert suite.name == "gold-page_activity"
    found = _by_type(view("page_activity"))
    assert set(found) == {
        "expect_table_columns_to_match_set",
        "expect_compound_columns_to_be_unique",
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_between",
    }
    (schema,) = found["expect_table_columns_to_match_set"]
    assert set(schema.column_set) == {
        "window_start",
        "window_date",
        "path",
        "page_views",
        "visitors",
        "load_count",
        "load_sum",
        "load_max",
        "load_sketch",
    }
    assert schema.exact_match is True
    (unique,) = found["expect_compound_columns_to_be_unique"]
    assert unique.column_list == ["window_start", "path"]
    assert _columns(found["expect_column_values_to_not_be_null"]) == {
        "window_start",
        "window_date",
        "path",
    }
    ranges = found["expect_column_values_to_be_between"]
    # sketches are bytes: no range; every number must be >= 0 with no upper bound
    assert _columns(ranges) == {"page_views", "load_count", "load_sum", "load_max"}
    assert {(e.min_value, e.max_value, e.strict_min) for e in ranges} == {(0, None, False)}


@pytest.mark.slow
@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_every_view_one_row_per_window_and_key_no_null_key_no_negative_number(spec: ViewSpec):
    found = _by_type(spec)
    (unique,) = found["expect_compound_columns_to_be_unique"]
    assert unique.column_list == ["window_start", *spec.keys]
    assert set(spec.keys) | {"window_start", "window_date"} <= _columns(
        found["expect_column_values_to_not_be_null"]
    )
    numbers = {m.name for m in spec.measures if not m.is_sketch}
    assert _columns(found["expect_column_values_to_be_between"]) == numbers
    (schema,) = found["expect_table_columns_to_match_set"]
    assert sorted(schema.column_set) == sorted([*spec.columns, "window_date"])


@pytest.mark.slow
@pytest.mark.parametrize("spec", WEB_VIEWS, ids=lambda v: v.name)
def test_every_expectation_says_which_view_field_and_rule(spec: ViewSpec):
    for expectation in view_suite(spec).expectations:
        assert expectation.meta["view"] == spec.name
        assert expectation.meta["rule"] in {"schema", "one row", "required", "not negative"}
        if expectation.meta["rule"] in {"required", "not negative"}:
            assert expectation.meta["field"] == expectation.column


def _report(**changes) -> GateReport:
    report = GateReport(
        "web_events",
        "gold",
        "scheduled__2024-03-01T10:00:00+00:00",
        ["2024-03-01"],
        "2024-03-01T10:05:00+00:00",
    )
    for name, value in changes.items():
        setattr(report, name, value)
    return report


NEGATIVE = ExpectationFailure(
    "expect_column_values_to_be_between",
    "clicks",
    {"view": "clicks", "field": "clicks", "rule": "not negative"},
    {"unexpected_count": 2, "examples": [-1, -3]},
)


def test_a_report_passes_only_when_every_suite_and_reconciliation_does():
    good = suite_result(ValidationSummary(True, (), {"evaluated_expectations": 4}))
    bad = suite_result(ValidationSummary(False, (NEGATIVE,), {"evaluated_expectations": 4}))
    ok = {"name": "sum", "expected": 5, "actual": 5, "ok": True}
    off = {"name": "sum(site_activity.events)", "expected": 5, "actual": 4, "ok": False}
    assert _report().passed  # nothing to check (no pending days) is a pass
    assert _report(suites={"gold/clicks": good}, reconciliations=[ok]).passed
    assert not _report(suites={"gold/clicks": bad}, reconciliations=[ok]).passed
    assert not _report(suites={"gold/clicks": good}, reconciliations=[ok, off]).passed
    failing = _report(suites={"gold/clicks": bad, "gold/search_terms": good}, reconciliations=[off])
    assert failing.failures() == [
        "gold/clicks: clicks not negative (expect_column_values_to_be_between) "
        "{'unexpected_count': 2, 'examples': [-1, -3]}",
        "reconciliation sum(site_activity.events): expected 5, got 4",
    ]


def test_the_report_is_written_as_json_and_markdown_under_a_safe_folder(lake_settings: Settings):
    stats = {"evaluated_expectations": 4, "successful_expectations": 3}
    bad = suite_result(ValidationSummary(False, (NEGATIVE,), stats))
    report = _report(suites={"gold/clicks": bad})
    path = report.write(lake_settings)
    folder = lake_settings.batch.reports_dir / "web_events" / "scheduled__2024-03-01T10_00_00_00_00"
    assert path == folder / "gold.md"
    data = json.loads((folder / "gold.json").read_text())
    assert data["passed"] is False
    assert data["days"] == ["2024-03-01"]
    assert data["suites"]["gold/clicks"]["failures"][0]["observed"]["examples"] == [-1, -3]
    markdown = Path(path).read_text()
    assert markdown.startswith("# Quality gate gold: FAILED\n")
    assert "| gold/clicks | FAILED | 3/4 |" in markdown
    assert "## Failures" in markdown and "- gold/clicks: clicks not negative" in markdown


def test_a_signed_measure_may_fall_below_zero():
    """A minute that refunds more than it sells has a negative net revenue: the gate does not
    refuse it (its counts stay held to zero or more)."""
    between = _columns(_by_type(view("orders_by_currency"))["expect_column_values_to_be_between"])
    assert "orders" in between and "refunds" in between
    assert "revenue_minor" not in between
