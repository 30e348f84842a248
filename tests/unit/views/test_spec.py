"""The registry and the spec types: shapes, validation, doc examples (no Spark job)."""

from __future__ import annotations

import pytest

import views
import views.registry
import views.spec
from tests.support.web import WEB_VIEWS
from views import MEASURE_KINDS, Measure, ViewSpec, view


def test_every_view_is_declared_once_with_a_build_function_named_after_it():
    names = [spec.name for spec in WEB_VIEWS]
    assert names == ["page_activity", "site_activity", "search_terms", "clicks"]
    for spec in WEB_VIEWS:
        assert spec.build.__name__ == f"build_{spec.name}"
        assert getattr(views, f"build_{spec.name}") is spec.build
        assert spec.build.__doc__
        assert spec.window == "1 minute"
        assert view(spec.name) is spec


def test_measure_kinds():
    assert MEASURE_KINDS == ("count", "sum", "max", "min", "hll", "kll")
    kinds = {(spec.name, m.name): m.kind for spec in WEB_VIEWS for m in spec.measures}
    assert kinds[("page_activity", "visitors")] == "hll"
    assert kinds[("page_activity", "load_sketch")] == "kll"
    assert kinds[("page_activity", "load_max")] == "max"
    assert kinds[("page_activity", "load_sum")] == "sum"
    assert kinds[("site_activity", "sessions_started")] == "count"
    assert view("page_activity").measure("visitors").is_sketch


def test_unknown_names_say_what_exists():
    with pytest.raises(
        KeyError, match=r"the views are: .*clicks, .*page_activity, .*site_activity"
    ):
        view("pages")
    with pytest.raises(KeyError, match=r"has no measure 'p95'.*page_views"):
        view("page_activity").measure("p95")


@pytest.mark.parametrize(
    ("keys", "measures", "error"),
    [
        ((), (Measure("n", "count"),), "at least one key"),
        (("k",), (), "at least one key and one measure"),
        (("k",), (Measure("k", "count"),), r"used twice: \['k'\]"),
        (("window_start",), (Measure("n", "count"),), "used twice"),
    ],
)
def test_view_spec_validation(keys, measures, error):
    with pytest.raises(ValueError, match=error):
        ViewSpec("v", keys, measures, lambda events: events, "test")


def test_view_spec_wants_tuples_and_identifiers():
    with pytest.raises(TypeError, match="tuples"):
        ViewSpec("v", ["k"], (Measure("n", "count"),), lambda e: e, "test")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="plain identifier"):
        ViewSpec("my view", ("k",), (Measure("n", "count"),), lambda e: e, "test")
    with pytest.raises(ValueError, match="plain identifier"):
        Measure("p-95", "max")
