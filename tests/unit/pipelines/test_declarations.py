"""Pipeline declarations: what one must get right, and the registry's rules across them."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.settings import PROJECT_ROOT, BatchSettings, KafkaSettings, Settings
from pipelines import (
    PIPELINES,
    Collector,
    DeclarationError,
    PipelineSpec,
    Producer,
    Reconciliation,
    check_deployment,
    check_pipelines,
    collector_routes,
    pipeline,
    validate_all,
)
from pipelines.registry import discover
from tests.support.web import WEB_VIEWS
from views import Measure, ViewSpec, view

WEB_EVENTS = pipeline("web_events")


def a_view(name: str, *measures: Measure) -> ViewSpec:
    """A view spec that is only declared, never built."""
    return ViewSpec(name, ("sku",), measures or (Measure("orders", "count"),), lambda e: e, name)


ORDERS = PipelineSpec(
    "orders", "orders", 1, ("orders_by_sku",), topic="shop.orders.v1", arrival=Producer("shop")
)


@pytest.fixture
def contracts(tmp_path):
    """A contracts folder holding ``web_events`` v1 and ``orders`` v1 and v2 (names only)."""
    for name, major in [("web_events", 1), ("orders", 1), ("orders", 2)]:
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / f"v{major}.odcs.yaml").write_text("")
    return tmp_path


def test_web_events_computes_every_view_and_reconciles_counts_only():
    assert pipeline("web_events") is WEB_EVENTS
    assert set(WEB_EVENTS.views) <= {v.name for v in WEB_VIEWS}
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


def test_an_unknown_pipeline_lists_the_known_ones_and_where_to_declare_one():
    with pytest.raises(KeyError, match=r"No pipeline 'web'; the pipelines are: .*web_events") as e:
        pipeline("web")
    assert "pipelines/declared/" in str(e.value)


def test_the_declared_pipelines_have_unique_names_and_views():
    names = [spec.name for spec in PIPELINES]
    assert len(names) == len(set(names))
    views = [v for spec in PIPELINES for v in spec.views]
    assert len(views) == len(set(views))


def test_distinct_pipelines_pass_the_check_unchanged(contracts):
    pipelines = (WEB_EVENTS, ORDERS)
    assert check_pipelines(pipelines, contracts) is pipelines


def test_two_pipelines_with_one_name_are_refused(contracts):
    twin = PipelineSpec("orders", "orders", 2, ("orders_v2",), topic="shop.orders.v2")
    with pytest.raises(DeclarationError, match=r"pipeline name 'orders' is declared 2 times"):
        check_pipelines((WEB_EVENTS, ORDERS, twin), contracts)


def test_a_view_in_two_pipelines_names_the_view_and_both_pipelines(contracts):
    # Both would write gold/clicks and the Cassandra batch_clicks tables.
    clicks_again = PipelineSpec("app_events", "orders", 2, ("clicks",), topic="app.events.v2")
    with pytest.raises(DeclarationError) as refused:
        check_pipelines((WEB_EVENTS, ORDERS, clicks_again), contracts)
    message = str(refused.value)
    assert "view 'clicks' is declared by pipelines web_events, app_events" in message
    assert "'orders'" not in message
    assert "keep each view in one pipeline" in message


def test_two_pipelines_on_one_topic_are_refused(contracts):
    again = PipelineSpec("orders_eu", "orders", 1, ("orders_eu",), topic="shop.orders.v1")
    with pytest.raises(DeclarationError, match=r"topic 'shop.orders.v1' is claimed by pipelines"):
        check_pipelines((ORDERS, again), contracts)
    collector_twice = PipelineSpec("app", "orders", 1, ("app_views",))
    with pytest.raises(DeclarationError, match=r"the collector's topic is claimed by pipelines"):
        check_pipelines((WEB_EVENTS, collector_twice), contracts)


def test_a_missing_contract_names_the_file_and_the_fix(contracts):
    ghost = PipelineSpec("ghost", "ghosts", 3, ("ghost_views",), topic="ghosts.v3")
    with pytest.raises(DeclarationError) as refused:
        check_pipelines((ghost,), contracts)
    assert "data_contracts/ghosts/v3.odcs.yaml does not exist" in str(refused.value).replace(
        contracts.name, "data_contracts"
    )
    assert "contract=/contract_major=" in str(refused.value)


def test_a_topic_whose_version_is_not_the_contract_s_major_is_refused():
    with pytest.raises(ValueError, match=r"topic 'shop.orders.v2' carries major version 2"):
        PipelineSpec("orders", "orders", 1, ("o",), topic="shop.orders.v2")


def test_identity_fields_must_be_contract_fields():
    wrong = PipelineSpec(
        "web2", "web_events", 1, ("page_activity",), topic="web2.v1", identity=("buyer",)
    )
    with pytest.raises(DeclarationError, match=r"identity fields \['buyer'\] are not fields"):
        validate_all((wrong,))


def test_a_contract_that_puts_its_records_on_another_topic_is_refused():
    elsewhere = PipelineSpec("web2", "web_events", 1, ("page_activity",), topic="web2.v1")
    with pytest.raises(DeclarationError, match=r"its contract web-events/1\.\d+\.\d+ says"):
        validate_all((elsewhere,))


def test_a_declaration_module_without_a_pipeline_is_refused(tmp_path, monkeypatch):
    package = tmp_path / "some_declarations"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "typo.py").write_text("PIPELNE = None\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    with pytest.raises(DeclarationError, match=r"some_declarations.typo declares no pipeline"):
        discover(importlib.import_module("some_declarations"))


def test_a_producer_pipeline_says_which_service_writes_its_topic():
    spec = PipelineSpec("o", "orders", 1, ("v",), topic="o.v1", arrival=Producer("checkout"))
    assert (spec.arrival.kind, spec.arrival.service) == ("producer", "checkout")
    assert WEB_EVENTS.arrival.kind == "collector"


def test_every_declared_pipeline_validates_against_its_views_and_contract():
    assert validate_all() is PIPELINES
    for spec in PIPELINES:
        assert [v.name for v in spec.view_specs] == list(spec.views)


def test_views_are_named_not_given_as_specs():
    with pytest.raises(
        TypeError, match=r"lists its views by name, e.g. views=\('page_activity',\)"
    ):
        PipelineSpec("orders", "orders", 1, (view("clicks"),))


def test_a_view_the_registry_does_not_know_fails_validation_not_declaration():
    spec = PipelineSpec("orders", "orders", 1, ("orders_by_sku",))
    with pytest.raises(KeyError, match=r"No view 'orders_by_sku'; the views are: .*page_activity"):
        spec.validate()


def test_declaring_the_pipelines_imports_no_spark():
    # Airflow's venv imports the declarations to parse the DAGs.
    code = (
        "import sys, pipelines; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'views')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PROJECT_ROOT
    )
    assert out.stdout.strip() == "[]"


# --- the collector's routes -------------------------------------------------------------------

MOBILE = PipelineSpec(
    "mobile",
    "orders",
    1,
    ("mobile_v",),
    topic="app.mobile.v1",
    arrival=Collector(("ios", "android")),
)


def test_a_named_source_goes_to_its_pipeline_and_the_others_to_the_default():
    routes = collector_routes(["ios", "web", "android"], (WEB_EVENTS, MOBILE))
    assert {source: spec.name for source, spec in routes.items()} == {
        "ios": "mobile",
        "web": "web_events",
        "android": "mobile",
    }


def test_a_source_no_pipeline_takes_is_refused_naming_it_and_the_fix():
    with pytest.raises(
        DeclarationError, match=r"sources \['web'\] .* go to no pipeline.*Collector"
    ):
        collector_routes(["ios", "web"], (MOBILE,))


def test_two_default_collector_pipelines_are_refused(contracts):
    second = PipelineSpec("more", "orders", 1, ("more_v",), topic="more.v1")
    with pytest.raises(DeclarationError, match=r"web_events, more each take every collector"):
        check_pipelines((WEB_EVENTS, second), contracts)


def test_a_source_named_by_two_pipelines_is_refused(contracts):
    tablet = PipelineSpec(
        "tablet", "orders", 1, ("tablet_v",), topic="tablet.v1", arrival=Collector(("ios",))
    )
    with pytest.raises(
        DeclarationError, match=r"source 'ios' is named by pipelines mobile, tablet"
    ):
        check_pipelines((WEB_EVENTS, MOBILE, tablet), contracts)


def test_a_collector_pipeline_with_its_sources_passes_the_check(contracts):
    pipelines = (WEB_EVENTS, MOBILE)
    assert check_pipelines(pipelines, contracts) is pipelines


@pytest.mark.parametrize(
    ("sources", "error"),
    [("ios", TypeError), (("ios", 1), TypeError), (("ios", "ios"), ValueError)],
)
def test_collector_sources_are_a_tuple_of_distinct_names(sources, error):
    with pytest.raises(error, match="sources"):
        Collector(sources)


def _deployed(**changes) -> Settings:
    """Settings with ``collector`` and ``kafka`` fields changed."""
    from core.collector_settings import CollectorSettings

    settings = Settings()
    collector = changes.pop("collector", {})
    kafka = changes.pop("kafka", {})
    return settings.model_copy(
        update={
            "collector": CollectorSettings(**{**settings.collector.model_dump(), **collector}),
            "kafka": KafkaSettings(**{**settings.kafka.model_dump(), **kafka}),
        }
    )


KEYS = {
    "local-website": "a-key-of-the-website-source",
    "ios": "a-key-of-the-ios-app-source",
    "android": "a-key-of-the-android-app-source",
}


def test_a_declared_topic_that_is_the_collectors_default_is_refused_with_settings():
    """Finding 4: a pipeline declaring topic="web.events.v1" (the collector default's topic)
    passed import and validate_all(): both wrote one bronze and one silver."""
    twin = PipelineSpec("twin", "orders", 1, ("twin_v",), topic="web.events.v1")
    with pytest.raises(DeclarationError, match=r"pipelines web_events, twin all read topic"):
        check_deployment((WEB_EVENTS, twin), _deployed())


def test_a_topic_override_onto_another_pipelines_topic_or_an_unknown_pipeline_is_refused():
    settings = _deployed(kafka={"topics": {"orders": "web.events.v1", "ghost": "g.v1"}})
    with pytest.raises(DeclarationError) as refused:
        check_deployment((WEB_EVENTS, ORDERS), settings)
    assert "pipelines web_events, orders all read topic 'web.events.v1'" in str(refused.value)
    assert "kafka.topics names 'ghost', which is no pipeline" in str(refused.value)


def test_two_topics_with_one_table_name_are_refused():
    """shop.orders-eu.v1 and shop.orders.eu.v1 are both bronze/silver shop_orders_eu_v1."""
    dashed = PipelineSpec("eu_a", "orders", 1, ("eu_a_v",), topic="shop.orders-eu.v1")
    dotted = PipelineSpec("eu_b", "orders", 1, ("eu_b_v",), topic="shop.orders.eu.v1")
    with pytest.raises(DeclarationError, match=r"would share bronze/shop_orders_eu_v1"):
        check_deployment((dashed, dotted), _deployed())


def test_a_declared_source_without_a_key_and_a_key_of_two_sources_are_refused():
    with pytest.raises(DeclarationError, match=r"source 'ios', which has no write key"):
        check_deployment((WEB_EVENTS, MOBILE), _deployed())
    shared = {"local-website": KEYS["ios"], "ios": KEYS["ios"]}
    with pytest.raises(DeclarationError, match=r"sources local-website, ios have the same"):
        check_deployment((WEB_EVENTS, MOBILE), _deployed(collector={"write_keys": shared}))


def test_the_declared_pipelines_deploy_on_the_default_settings():
    assert check_deployment(PIPELINES, Settings()) is PIPELINES
    settings = _deployed(collector={"write_keys": KEYS})
    assert check_deployment((WEB_EVENTS, MOBILE, ORDERS), settings) == (WEB_EVENTS, MOBILE, ORDERS)
    with pytest.raises(DeclarationError, match="no write key"):
        validate_all((WEB_EVENTS, MOBILE), settings=_deployed())


def test_an_owner_or_reader_that_is_no_declared_team_is_refused_with_the_teams(contracts):
    unknown = PipelineSpec(
        "orders",
        "orders",
        2,
        ("orders_v2",),
        topic="shop.orders.v2",
        owner="shop-data",
        readers=("marketing", "finance"),
    )
    with pytest.raises(DeclarationError) as refused:
        check_pipelines((WEB_EVENTS, unknown), contracts)
    message = str(refused.value)
    assert "pipeline 'orders' names team 'finance' (readers=)" in message
    assert "pipelines/teams.py" in message and "marketing" not in message.split("(teams:")[0]


def test_a_pipeline_is_read_by_its_owner_its_readers_and_the_admins_only():
    web = PipelineSpec(
        "web", "orders", 2, ("w",), topic="w.v2", owner="web-analytics", readers=("marketing",)
    )
    allowed = [
        t
        for t in ("web-analytics", "marketing", "data-platform", "shop-data")
        if web.readable_by(frozenset({t}))
    ]
    assert allowed == ["web-analytics", "marketing", "data-platform"]
    assert not web.readable_by(frozenset())
