"""The expectation suite derived from the contract, and its runs on Spark.

Spark tests use the run's one shared session (``spark`` in tests/conftest.py).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections import Counter

import pytest
from open_data_contract_standard.model import DataQuality

from core.frames import local_frame
from data_contracts import Contract, load_contract
from data_contracts.derive import expectation_suite, to_spark_schema, validate_dataframe

TS = dt.datetime(2026, 11, 21, 10, 0, tzinfo=dt.UTC)


def _event(key: str, **fields: object) -> dict:
    """A parsed event as silver holds it: timestamps as datetimes, typed objects as structs."""
    event = {
        "event_id": key,
        "messageId": key,
        "type": "page",
        "anonymousId": "anon-1",
        "name": "Home",
        "properties": {"path": "/", "url": "https://example.com/", "load_time_ms": 120.0},
        "context": {
            "page": {"url": "https://example.com/", "path": "/"},
            "ip": "192.0.2.1",
            "library": {"name": "analytics.js", "version": "5.0.0"},
        },
        "timestamp": TS,
        "receivedAt": TS,
        "source_id": "site-1",
        "contract_version": "1.0.0",
    }
    return event | fields


VALID = [
    _event("e1"),
    _event(
        "e2", type="track", event="Site Searched", properties={"query": "x", "results_count": 3}
    ),
    _event("e3", type="identify", userId="u1", traits='{"plan": "pro"}'),
    _event("e4", type="alias", userId="u1", previousId="anon-1"),
    _event("e5", type="group", userId="u1", groupId="acme"),
]


@pytest.fixture(scope="module")
def contract() -> Contract:
    return load_contract("web_events", 1)


@pytest.fixture(scope="module")
def suite(contract):
    return expectation_suite(contract)


def _rules(suite) -> Counter:
    return Counter(e.meta["rule"] for e in suite.expectations)


def test_suite_has_one_expectation_per_contract_rule(suite, contract):
    assert suite.name == "web-events-1.1.0"
    assert suite.meta["not_checked"] == []
    assert _rules(suite) == {
        "schema": 1,
        "required": 7,
        "enum": 1,
        "minLength": 8,
        "maxLength": 31,
        "minimum": 3,  # load_time_ms, engaged_ms, results_count
        "maximum": 2,  # load_time_ms, engaged_ms
        "pattern": 1,
        "primaryKey": 1,
        "identity": 1,
        "track_has_event_name": 1,
        "alias_has_previous_id": 1,
        "group_has_group_id": 1,
    }
    for expectation in suite.expectations:
        assert expectation.meta["contract"] == "web-events/1.1.0"
        assert expectation.meta["field"]


def test_nested_fields_are_checked_by_dotted_path(suite):
    from great_expectations.expectations.row_conditions import Column

    by_key = {(e.meta["field"], e.meta["rule"]): e for e in suite.expectations}
    maximum = by_key["properties.load_time_ms", "maximum"]
    assert maximum.expectation_type == "expect_column_values_to_be_between"
    assert (maximum.column, maximum.max_value, maximum.min_value) == (
        "properties.load_time_ms",
        600000,
        None,
    )
    assert by_key["context.campaign.source", "maxLength"].max_value == 500
    columns = by_key["*", "schema"].column_set
    assert {"traits", "context", "context.page", "context.page.url"} <= set(columns)
    key = by_key["source_id, event_id", "primaryKey"]
    assert key.expectation_type == "expect_compound_columns_to_be_unique"
    assert key.column_list == ["source_id", "event_id"]
    assert key.meta["quality"] == "unique_event_id"
    assert by_key["event", "track_has_event_name"].row_condition == (Column("type") == "track")
    assert by_key["userId", "identity"].row_condition == Column("anonymousId").is_null()
    assert by_key["event_id", "required"].row_condition is None


def test_flatten_false_checks_top_level_fields_only(contract, suite):
    top = expectation_suite(contract, name="top", flatten=False, extra_columns=["event_date"])
    fields = {e.meta["field"] for e in top.expectations}
    assert "properties.load_time_ms" not in fields
    assert not any("." in f for f in fields)
    assert top.expectations[0].column_set == [*suite.expectations[0].column_set, "event_date"]


def test_nested_required_field_only_where_its_object_is_present(contract):
    from great_expectations.expectations.row_conditions import Column

    document = copy.deepcopy(contract.document)
    properties = next(p for p in document.schema_[0].properties if p.name == "properties")
    next(p for p in properties.properties if p.name == "path").required = True
    odd = DataQuality(name="odd", type="custom", engine="jsonschema", implementation={"not": {}})
    document.schema_[0].quality.append(odd)
    suite = expectation_suite(Contract("web_events", document))
    (path_required,) = [
        e
        for e in suite.expectations
        if e.meta
        == {"contract": "web-events/1.1.0", "field": "properties.path", "rule": "required"}
    ]
    assert path_required.row_condition == Column("properties").is_not_null()
    assert suite.meta["not_checked"] == ["odd"]


@pytest.mark.slow
def test_valid_events_pass(spark, contract, suite):
    df = local_frame(spark, VALID, to_spark_schema(contract))
    summary = validate_dataframe(df, suite)
    assert summary.success, str(summary)
    assert summary.failures == ()
    assert summary.statistics["evaluated_expectations"] == len(suite.expectations)
    assert not df.is_cached, "the DataFrame is unpersisted after the run"


@pytest.mark.slow
def test_each_broken_rule_is_reported_with_its_field_and_rule(spark, contract, suite):
    from pyspark.sql import functions as F

    broken = [
        _event("no-id", event_id=None),
        _event("bad-type", type="bogus"),
        _event("slow", properties={"load_time_ms": -5.0}),
        _event("dup"),
        _event("dup"),
        _event("dup", source_id="site-2"),  # another source's id: another event
        _event("bad-version", contract_version="v1"),
        _event("nameless-track", type="track"),
        _event("nobody", anonymousId=None),
    ]
    df = local_frame(spark, [*VALID, *broken], to_spark_schema(contract))
    drifted = df.drop("traits", "name").withColumn("extra", F.lit(1))
    summary = validate_dataframe(drifted, suite)
    assert not summary.success
    found = {(f.meta["field"], f.meta["rule"]): f for f in summary.failures}
    assert set(found) == {
        ("event_id", "required"),
        ("type", "enum"),
        ("properties.load_time_ms", "minimum"),
        ("source_id, event_id", "primaryKey"),
        ("contract_version", "pattern"),
        ("event", "track_has_event_name"),
        ("userId", "identity"),
        ("*", "schema"),
        ("name", "maxLength"),
    }
    assert found["type", "enum"].observed["examples"] == ["bogus"]
    minimum = found["properties.load_time_ms", "minimum"]
    assert (minimum.column, minimum.observed["unexpected_count"]) == ("properties.load_time_ms", 1)
    assert minimum.observed["examples"] == [-5.0]
    duplicates = found["source_id, event_id", "primaryKey"].observed
    assert duplicates["unexpected_count"] == 2, "the two copies of site-1's dup"
    assert found["contract_version", "pattern"].observed["examples"] == ["v1"]
    assert "properties.load_time_ms: minimum" in str(summary)
    schema = found["*", "schema"]
    assert (schema.expectation, schema.column) == ("expect_table_columns_to_match_set", None)
    assert schema.observed == {
        "mismatched": {"missing": ["name", "traits"], "unexpected": ["extra"]}
    }
    assert "name" in found["name", "maxLength"].observed["error"], "a missing column is an error"
