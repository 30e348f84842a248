"""A view's distinct-count sketch does not tell who is in it, in either mode.

The analyst's membership test: union a sketch of one candidate id
(``hll_sketch_agg('buyer-0007')``) with a window's sketch; if the estimate does
not move, the candidate is in the window. Over the ids as sent (the views'
input before the digest existed) it finds every buyer of every window; over
the views' input as both layers prepare it (each id a keyed digest,
:mod:`views.digest`) it finds no one, in batch and in streaming rows, while
the same test with the candidates' digests, which only the key's holder can
compute, finds every buyer again: the method is sound, the key is what it
lacks. Both modes' sketches hold the same digests: they union into a sketch of
the same registers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from data_contracts import load_contract
from pipelines import pipeline
from pipelines.simulators.checkouts import CheckoutConfig, build_truth, generate
from views import ViewSpec, view
from views.digest import keyed_digest
from views.sketches import hll_union

from .conftest import KEY, Runner

pytestmark = pytest.mark.slow

CHECKOUTS = CheckoutConfig(
    seed=5,
    events=300,
    start=datetime(2024, 6, 2, 9, tzinfo=UTC),
    rate=2.0,
    refund_rate=0.1,
    duplicate_rate=0.0,
    late_rate=0.0,
    invalid_rate=0.0,
)
BUYERS = [f"buyer-{i:04d}" for i in range(CHECKOUTS.buyers)]
"""Every buyer id the simulated checkout service can produce: the analyst's candidates."""
USERS = [f"user-{i:06d}" for i in range(1000)]
"""Every userId the simulated site can produce (``SimulatorConfig.users``)."""

ORDERS, PAGES, SITE = view("orders_by_currency"), view("page_activity"), view("site_activity")
Found = set[tuple[object, ...]]


def members(rows: DataFrame, spec: ViewSpec, measure: str, candidates: Iterable[str]) -> Found:
    """``(window_start, *keys, candidate)`` for each row whose ``measure`` sketch does not
    move when unioned with a sketch of the candidate alone: the analyst's membership test,
    in the SQL functions the SQL server allows."""
    spark = rows.sparkSession
    probes = (
        spark.createDataFrame([(c,) for c in candidates], "candidate string")
        .groupBy("candidate")
        .agg(F.hll_sketch_agg("candidate").alias("probe"))
    )
    sketch = F.col(measure)
    alone = F.hll_sketch_estimate(F.hll_union(sketch, sketch, True))
    unmoved = F.hll_sketch_estimate(F.hll_union(sketch, F.col("probe"), True)) == alone
    found = (
        rows.where(sketch.isNotNull())
        .crossJoin(F.broadcast(probes))
        .where(unmoved)
        .select(F.date_format("window_start", "HH:mm").alias("m"), *spec.keys, "candidate")
    )
    return {tuple(row) for row in found.collect()}


def digested(found: Found, candidates: Iterable[str]) -> Found:
    """``found`` with each digest candidate named by the id it is the digest of."""
    named = {keyed_digest(KEY.get_secret_value().encode(), c): c for c in candidates}
    return {(*row[:-1], named[row[-1]]) for row in found}


def digests(candidates: Iterable[str]) -> list[str]:
    key = KEY.get_secret_value().encode()
    return [keyed_digest(key, c) or "" for c in candidates]


@pytest.fixture(scope="module")
def checkouts(spark, tmp_path_factory):
    """The simulated checkout service's records in three files, a runner of its pipeline's
    views and the truth: who bought in which minute, in which currency."""
    records = generate(CHECKOUTS)
    lines = [record.value.decode() for record in records]
    source = tmp_path_factory.mktemp("private-checkouts")
    for index in range(3):
        part = lines[index * len(lines) // 3 : (index + 1) * len(lines) // 3]
        (source / f"records-{index}.json").write_text("\n".join(part) + "\n")
    session = spark.newSession()
    session.conf.set("spark.sql.shuffle.partitions", "2")
    contract, identity = load_contract("checkouts", 1), pipeline("checkouts").identity
    truth = build_truth(records)
    bought = {
        (minute[11:16], currency, buyer)
        for (minute, currency), cell in truth.by_minute.items()
        for buyer in cell.buyers
    }
    assert len(bought) > 50
    return Runner(session, contract, tmp_path_factory, identity), source, bought


@pytest.fixture(scope="module")
def streamed_orders(checkouts):
    runner, source, _ = checkouts
    return runner.streams([ORDERS], source)[ORDERS.name].frame


@pytest.fixture(scope="module")
def streamed_web(runner, simulation):
    streamed = runner.streams([PAGES, SITE], simulation.source)
    return {name: run.frame for name, run in streamed.items()}


def test_the_membership_test_found_every_buyer_over_ids_as_sent(checkouts):
    runner, source, bought = checkouts
    raw = ORDERS.build(runner.events(source, digested=False))
    assert members(raw, ORDERS, "buyers", BUYERS) == bought


def test_no_candidate_buyer_is_found_in_either_mode_but_their_digests_are(
    checkouts, streamed_orders, mode
):
    runner, source, bought = checkouts
    rows = ORDERS.build(runner.events(source)) if mode == "batch" else streamed_orders
    assert members(rows, ORDERS, "buyers", BUYERS) == set()
    assert digested(members(rows, ORDERS, "buyers", digests(BUYERS)), BUYERS) == bought


def test_no_candidate_user_is_found_in_the_visitors_of_pages_in_either_mode(
    runner, simulation, streamed_web, mode
):
    raw = members(
        PAGES.build(runner.events(simulation.source, digested=False)), PAGES, "visitors", USERS
    )
    assert len({row[-1] for row in raw}) > 5, "the control: userIds found over ids as sent"
    rows = (
        PAGES.build(runner.events(simulation.source))
        if mode == "batch"
        else streamed_web[PAGES.name]
    )
    assert members(rows, PAGES, "visitors", USERS) == set()
    assert digested(members(rows, PAGES, "visitors", digests(USERS)), USERS) == raw


@pytest.mark.parametrize("spec", [PAGES, SITE, ORDERS], ids=lambda spec: spec.name)
def test_both_modes_sketch_the_same_digests(
    spec, runner, simulation, checkouts, streamed_web, streamed_orders
):
    if spec is ORDERS:
        orders_runner, source, _ = checkouts
        batch, stream = ORDERS.build(orders_runner.events(source)), streamed_orders
    else:
        batch, stream = spec.build(runner.events(simulation.source)), streamed_web[spec.name]
    (measure,) = [m.name for m in spec.measures if m.kind == "hll"]
    index = ("window_start", *spec.keys)
    ours = {tuple(r[c] for c in index): r[measure] for r in batch.collect()}
    theirs = {tuple(r[c] for c in index): r[measure] for r in stream.collect()}
    assert ours.keys() == theirs.keys() and len(ours) > 3
    for key, sketch in ours.items():
        alone = hll_union([sketch, sketch])
        assert hll_union([theirs[key], theirs[key]]) == alone, key
        assert hll_union([sketch, theirs[key]]) == alone, key  # the same members
