"""The checkouts pipeline in tests: its records, a speed job streaming it beside the web
pipeline, and its answers against its ground truth, whichever layer holds them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from core.settings import KafkaSettings, Settings
from pipelines import pipeline
from pipelines.simulators import checkouts as shop
from pipelines.simulators.checkouts import CheckoutTruth

__all__ = [
    "CHECKOUTS",
    "assert_orders_equal_truth",
    "checkout_records",
    "orders_counted",
    "streaming_checkouts",
]

CHECKOUTS = pipeline("checkouts")


def assert_orders_equal_truth(got: Mapping[tuple[str, str], Any], truth: CheckoutTruth) -> None:
    """``got``: per ``(minute "2024-06-01T23:40:00Z", currency)`` a row with ``orders``,
    ``refunds`` and ``revenue_minor``; each equals the simulator's truth, no row more or less."""
    assert set(got) == set(truth.by_minute)
    for key, cell in truth.by_minute.items():
        row = got[key]
        expected = (cell.orders, cell.refunds, cell.revenue_minor)
        assert (row.orders, row.refunds, row.revenue_minor) == expected, key


def checkout_records(seed: int, start: datetime, events: int = 150) -> list[shop.Record]:
    """The checkout service's records from ``start``, two a second, with refunds, retries,
    events out of order and broken records; none produced late (``start`` may be minutes
    ago without a record's ``receivedAt`` lying in the future)."""
    config = shop.CheckoutConfig(
        seed=seed,
        events=events,
        start=start,
        rate=2.0,
        refund_rate=0.08,
        duplicate_rate=0.05,
        late_rate=0.0,
        out_of_order_rate=0.1,
        invalid_rate=0.03,
    )
    return shop.generate(config)


def streaming_checkouts(
    settings: Settings, topic: str, pipelines: Sequence[str] = ("web_events", "checkouts")
) -> Settings:
    """``settings`` (a speed test's) whose speed job streams ``pipelines``, checkouts read
    from ``topic`` (the test's own), its tables created."""
    from layout import create_tables

    kafka = KafkaSettings(**settings.kafka.model_dump() | {"topics": {CHECKOUTS.name: topic}})
    speed = settings.speed.model_copy(
        update={"pipelines": list(pipelines), "restart_backoff_s": 2.0}
    )
    settings = settings.model_copy(update={"kafka": kafka, "speed": speed})
    create_tables(settings, CHECKOUTS.view_specs)
    return settings


def orders_counted(
    read_view: Callable[[Settings, str], Mapping[tuple, Any]],
    settings: Settings,
    truth: CheckoutTruth,
) -> Callable[[], bool]:
    """A check for ``wait_for``: the speed rows of ``orders_by_currency`` serving reads
    (``read_view``, the speed tests' fixture) equal ``truth``."""

    def check() -> bool:
        rows = read_view(settings, "orders_by_currency")
        got = {(_minute(window), currency): row for (window, currency), row in rows.items()}
        try:
            assert_orders_equal_truth(got, truth)
        except AssertionError:
            return False
        return True

    return check


def _minute(window: datetime) -> str:
    """A window start as the truth keys it (Cassandra's are naive UTC)."""
    return window.replace(tzinfo=window.tzinfo or UTC).strftime("%Y-%m-%dT%H:%M:00Z")
