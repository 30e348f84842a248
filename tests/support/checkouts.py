"""The checkouts pipeline's answers against its ground truth, whichever layer holds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pipelines.simulators.checkouts import CheckoutTruth

__all__ = ["assert_orders_equal_truth"]


def assert_orders_equal_truth(got: Mapping[tuple[str, str], Any], truth: CheckoutTruth) -> None:
    """``got``: per ``(minute "2024-06-01T23:40:00Z", currency)`` a row with ``orders``,
    ``refunds`` and ``revenue_minor``; each equals the simulator's truth, no row more or less."""
    assert set(got) == set(truth.by_minute)
    for key, cell in truth.by_minute.items():
        row = got[key]
        expected = (cell.orders, cell.refunds, cell.revenue_minor)
        assert (row.orders, row.refunds, row.revenue_minor) == expected, key
