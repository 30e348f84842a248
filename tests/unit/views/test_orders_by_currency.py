"""``orders_by_currency`` (the checkouts pipeline's view) in both modes, against the simulated
checkout service's ground truth: exact counts and revenue, buyers and order values from their
sketches."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from data_contracts import load_contract
from pipelines import pipeline
from pipelines.simulators.checkouts import CheckoutConfig, build_truth, generate
from views.orders_by_currency import SPEC

from .conftest import Runner

CHECKOUTS = CheckoutConfig(
    seed=11,
    events=400,
    start=datetime(2024, 6, 1, 12, tzinfo=UTC),
    rate=2.0,  # a little over three minutes, so windows fill across micro-batches
    refund_rate=0.1,
    duplicate_rate=0.0,  # the views' input is deduplicated (both layers do it before)
    late_rate=0.05,
    late_by_s=60,
    invalid_rate=0.05,
)


@pytest.fixture(scope="module")
def checkouts(spark, tmp_path_factory, write_events):
    records = generate(CHECKOUTS)
    lines = [record.value.decode() for record in records]
    source = tmp_path_factory.mktemp("checkouts")
    for index in range(3):  # three files: three micro-batches in stream mode
        part = lines[index * len(lines) // 3 : (index + 1) * len(lines) // 3]
        (source / f"records-{index}.json").write_text("\n".join(part) + "\n")
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    identity = pipeline("checkouts").identity
    runner = Runner(session, load_contract("checkouts", 1), tmp_path_factory, identity)
    return runner, source, build_truth(records)


def test_orders_refunds_revenue_buyers_and_values_equal_the_truth_in_both_modes(checkouts, mode):
    runner, source, truth = checkouts
    if mode == "batch":
        table = runner.batch(SPEC, source)
    else:
        streamed = runner.streams([SPEC], source)[SPEC.name]
        assert streamed.batches_with_updates >= 2
        table = streamed.table
    expected = {(minute, currency): cell for (minute, currency), cell in truth.by_minute.items()}
    assert set(table) == set(expected)
    for key, cell in expected.items():
        row = table[key]
        assert (row["orders"], row["refunds"]) == (cell.orders, cell.refunds), key
        assert row["revenue_minor"] == cell.revenue_minor, key
        assert row["buyers"] == len(cell.buyers), key  # exact at these cardinalities
        if cell.order_values:
            assert row["order_value_n"] == len(cell.order_values)
            assert row["order_value_p0"] == min(cell.order_values)
            assert row["order_value_p100"] == max(cell.order_values)
        else:
            assert row["order_value_n"] in (0, None)
    assert truth.invalid > 0 and truth.totals()["refunds"] > 0
