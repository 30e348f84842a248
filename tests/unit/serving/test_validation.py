"""What the query core refuses before it reads anything, and the answer's row formatter."""

from __future__ import annotations

import pytest

from serving.errors import QueryError
from serving.merge import row_formatter, summarise
from serving.query import Limits, Queries, RangeQuery, check_keys, check_quantiles
from serving.rules import check_measures
from views import view

DAY = 24 * 3600 * 1000
PAGE = view("page_activity")


def test_ranges_are_checked() -> None:
    limits = Limits(max_range_days=2)
    assert RangeQuery.checked(0, 2 * DAY, limits) == RangeQuery(0, 2 * DAY)
    assert RangeQuery.checked(5, 5, limits).hi == 5  # empty is fine
    with pytest.raises(QueryError, match="before start") as error:
        RangeQuery.checked(10, 5, limits)
    assert error.value.code == "invalid_range"
    with pytest.raises(QueryError, match="at most 2") as error:
        RangeQuery.checked(0, 2 * DAY + 1, limits)
    assert error.value.code == "range_too_large" and error.value.status == 400


@pytest.mark.parametrize(
    ("keys", "code"),
    [
        ([], "missing_key"),
        ([("a", "b")], "invalid_key"),
        ([("",)], "invalid_key"),
        ([("x" * 2049,)], "invalid_key"),
        ([(str(i),) for i in range(21)], "too_many_keys"),
    ],
)
def test_keys_are_checked(keys, code) -> None:
    with pytest.raises(QueryError) as error:
        check_keys(PAGE, keys, Limits())
    assert error.value.code == code


def test_injection_strings_are_valid_keys() -> None:
    check_keys(PAGE, [("'; DROP TABLE speed_page_activity; --",)], Limits())


def test_measures_are_chosen_in_view_order() -> None:
    assert [m.name for m in check_measures(PAGE, ["visitors", "page_views"])] == [
        "page_views",
        "visitors",
    ]
    assert check_measures(PAGE, []) == PAGE.measures
    with pytest.raises(QueryError, match="load_sketch") as error:
        check_measures(PAGE, ["nope"])
    assert error.value.code == "unknown_measure"


def test_the_row_formatter_agrees_with_the_general_merge() -> None:
    import datasketches as ds

    hll = ds.hll_sketch(12)
    for i in range(40):
        hll.update(f"u{i}")
    kll = ds.kll_doubles_sketch(200)
    for v in range(1, 101):
        kll.update(float(v))
    rows = [
        (3, hll.serialize_compact(), 2, 5.0, 4.0, kll.serialize()),
        (None, None, None, None, None, None),
        (0, None, 0, None, None, None),
    ]
    for quantiles in ((0.5, 0.95), (0.99,)):
        fmt = row_formatter(PAGE.measures, quantiles)
        for row in rows:
            assert fmt(row) == summarise(PAGE.measures, [row], quantiles)
        assert fmt(None) == summarise(PAGE.measures, [], quantiles)


def test_quantiles_are_checked_one_by_one() -> None:
    assert check_quantiles([0.0, 0.9, 1], Limits()) == (0.0, 0.9, 1.0)
    for bad in (1.5, -0.1, float("nan"), float("inf")):
        with pytest.raises(QueryError, match=r"\[0, 1\]") as error:
            check_quantiles([0.5, bad], Limits())
        assert error.value.code == "invalid_quantile" and error.value.status == 400
    with pytest.raises(QueryError, match="at most 3") as error:
        check_quantiles([0.1, 0.2, 0.3, 0.4], Limits(max_quantiles=3))
    assert error.value.code == "too_many_quantiles"
    with pytest.raises(QueryError) as error:
        check_quantiles([], Limits())
    assert error.value.code == "invalid_quantile"


def test_row_formatters_for_asked_quantiles_are_bounded() -> None:
    queries = Queries(store=None)  # formatting needs no store
    kll = PAGE.measures[-1:]
    first = queries._formatter(PAGE, kll, (0.5,))
    assert queries._formatter(PAGE, kll, (0.5,)) is first
    for i in range(1, 2000):
        fmt = queries._formatter(PAGE, kll, (i / 2000,))
        assert f"load_sketch_p{i / 20:g}".replace(".", "_") in fmt(None)
    assert len(queries._formatters) <= 256
