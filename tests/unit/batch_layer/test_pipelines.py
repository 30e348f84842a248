"""Pipeline specs: what a declaration must get right, and the registry's uniqueness rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from batch_layer.pipelines import (
    PIPELINES,
    WEB_EVENTS,
    PipelineSpec,
    Reconciliation,
    _check_pipelines,
    pipeline,
)
from core.settings import PROJECT_ROOT, BatchSettings, KafkaSettings, Settings
from views import VIEWS, Measure, ViewSpec, view


def a_view(name: str, *measures: Measure) -> ViewSpec:
    """A view spec that is only declared, never built."""
    return ViewSpec(name, ("sku",), measures or (Measure("orders", "count"),), lambda e: e, name)


ORDERS = PipelineSpec("orders", "orders", 1, ("orders_by_sku",), topic="shop.orders.v1")


def test_web_events_computes_every_view_and_reconciles_counts_only():
    assert pipeline("web_events") is WEB_EVENTS
    assert list(WEB_EVENTS.views) == [v.name for v in VIEWS]
    assert (WEB_EVENTS.contract, WEB_EVENTS.contract_major) == ("web_events", 1)
    checked = {(r.view, r.measure) for r in WEB_EVENTS.reconcile}
    assert checked == {
        ("site_activity", "events"),
        ("site_activity", "page_views"),
        ("page_activity", "page_views"),
    }
    for rule in WEB_EVENTS.reconcile:
        assert view(rule.view).measure(rule.measure).kind == "count"


@pytest.mark.parametrize("name", ["web events", "web-events", "1st", ""])
def test_a_name_must_be_a_plain_identifier(name: str):
    with pytest.raises(ValueError, match="must be a plain identifier"):
        PipelineSpec(name, "c", 1, ("v",))


def test_a_pipeline_needs_a_view():
    with pytest.raises(ValueError, match="'orders' needs at least one view"):
        PipelineSpec("orders", "orders", 1, ())


def test_a_view_listed_twice_is_refused():
    with pytest.raises(ValueError, match=r"lists views more than once: \['a'\]"):
        PipelineSpec("orders", "orders", 1, ("a", "b", "a"))


def test_a_reconciliation_of_an_unknown_view_names_it():
    rule = Reconciliation("refunds", "orders")
    with pytest.raises(ValueError, match="reconciliation of unknown view 'refunds'"):
        PipelineSpec("orders", "orders", 1, ("orders_by_sku",), reconcile=(rule,))


def test_a_reconciliation_of_an_unknown_measure_lists_the_view_s_measures(declare_views):
    declare_views(a_view("orders_by_sku"))
    rule = Reconciliation("orders_by_sku", "refunds")
    spec = PipelineSpec("orders", "orders", 1, ("orders_by_sku",), reconcile=(rule,))
    with pytest.raises(KeyError, match="has no measure 'refunds'; it has: orders"):
        spec.validate()


@pytest.mark.parametrize("kind", ["sum", "max", "hll", "kll"])
def test_only_a_count_can_reconcile_with_silver_rows(kind: str, declare_views):
    spec = a_view("orders_by_sku", Measure("orders", "count"), Measure("amount", kind))
    declare_views(spec)
    rule = Reconciliation(spec.name, "amount")
    pipeline_spec = PipelineSpec("orders", "orders", 1, (spec.name,), reconcile=(rule,))
    with pytest.raises(ValueError, match=rf"orders_by_sku\.amount, a {kind} measure"):
        pipeline_spec.validate()


def test_topic_schedule_and_table_name_default_to_settings():
    settings = Settings(
        kafka=KafkaSettings(events_topic="web-events.v3"), batch=BatchSettings(schedule="@daily")
    )
    assert WEB_EVENTS.topic_of(settings) == "web-events.v3"
    assert WEB_EVENTS.schedule_of(settings) == "@daily"
    assert WEB_EVENTS.table_name(settings) == "web_events_v3"
    hourly = PipelineSpec("o", "orders", 1, ("v",), topic="shop.orders.v1", schedule="0 *")
    assert hourly.topic_of(settings) == "shop.orders.v1"
    assert hourly.schedule_of(settings) == "0 *"
    assert hourly.table_name(settings) == "shop_orders_v1"


def test_an_unknown_pipeline_lists_the_known_ones():
    with pytest.raises(KeyError, match=r"No pipeline 'web'; the pipelines are: web_events\."):
        pipeline("web")


def test_the_declared_pipelines_have_unique_names_and_views():
    names = [spec.name for spec in PIPELINES]
    assert len(names) == len(set(names))
    views = [v for spec in PIPELINES for v in spec.views]
    assert len(views) == len(set(views))


def test_distinct_pipelines_pass_the_check_unchanged():
    pipelines = (WEB_EVENTS, ORDERS)
    assert _check_pipelines(pipelines) is pipelines


def test_two_pipelines_with_one_name_are_refused():
    twin = PipelineSpec("orders", "orders", 2, ("orders_v2",), topic="shop.orders.v2")
    with pytest.raises(ValueError, match=r"Pipelines declared more than once: \['orders'\]"):
        _check_pipelines((WEB_EVENTS, ORDERS, twin))


def test_a_view_in_two_pipelines_names_the_view_and_both_pipelines():
    # Both would write gold/clicks and the Cassandra batch_clicks tables.
    clicks_again = PipelineSpec("app_events", "app_events", 1, ("clicks",))
    with pytest.raises(ValueError) as refused:
        _check_pipelines((WEB_EVENTS, ORDERS, clicks_again))
    message = str(refused.value)
    assert "'clicks' (pipelines web_events, app_events)" in message
    assert "orders" not in message
    assert "batch_<view>" in message


def test_every_declared_pipeline_validates_against_its_views():
    for spec in PIPELINES:
        assert spec.validate() is spec
        assert [v.name for v in spec.view_specs] == list(spec.views)


def test_views_are_named_not_given_as_specs():
    with pytest.raises(
        TypeError, match=r"lists its views by name, e.g. views=\('page_activity',\)"
    ):
        PipelineSpec("orders", "orders", 1, (view("clicks"),))


def test_a_view_the_registry_does_not_know_fails_validation_not_declaration():
    spec = PipelineSpec("orders", "orders", 1, ("orders_by_sku",))
    with pytest.raises(KeyError, match="No view 'orders_by_sku'; the views are: page_activity"):
        spec.validate()


def test_declaring_the_pipelines_imports_no_spark():
    # Airflow's venv imports batch_layer.pipelines to parse the DAGs.
    code = (
        "import sys, batch_layer.pipelines; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'views')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT
    )
    assert out.stdout.strip() == "[]"
