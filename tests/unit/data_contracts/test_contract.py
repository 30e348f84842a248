from __future__ import annotations

import copy

import pytest

from data_contracts import ContractError, load_contract
from data_contracts.compat import FieldShape, breaking_changes, check_compatibility, shape_of
from data_contracts.derive import (
    ValidationFailure,
    compile_fast_validator,
    compile_validator,
    to_json_schema,
)

VALID = {
    "event_id": "e1",
    "messageId": "e1",
    "type": "page",
    "anonymousId": "a",
    "timestamp": "2026-11-21T10:00:00.000Z",
    "receivedAt": "2026-11-21T10:00:00.000Z",
    "source_id": "s",
    "contract_version": "1.0.0",
    "properties": {"path": "/x", "load_time_ms": 120},
    "integrations": {"All": True},  # extra Segment fields pass through
}


@pytest.fixture(scope="module")
def contract():
    return load_contract("web_events", 1)


@pytest.fixture(scope="module", params=["json_schema", "msgspec"])
def validate(contract, request):
    """Every validator test runs against both derived validators: they must agree."""
    compile_ = compile_validator if request.param == "json_schema" else compile_fast_validator
    return compile_(contract)


def test_contract_is_odcs_and_describes_the_kafka_record(contract):
    assert contract.ref == "web-events/1.1.0"
    assert contract.topic == "web.events.v1"
    assert "anonymousId" in contract.custom_property("kafka.key")
    assert all(p.description for p in contract.properties), "every field states its meaning"
    assert contract.document.team is not None


def test_an_event_is_identified_by_its_source_and_id(contract):
    # A client's messageId is unique only within its source: two sites may send the same.
    assert contract.key == ("source_id", "event_id")


def test_valid_event_passes(validate):
    validate(copy.deepcopy(VALID))


def test_engaged_time_is_optional_since_1_1(validate):
    validate(_mutate("properties.engaged_ms", 1234.5))
    validate(_mutate("properties.engaged_ms", 0))
    validate(copy.deepcopy(VALID) | {"contract_version": "1.0.0"})  # as 1.0 producers send


def _mutate(path: str, value: object) -> dict:
    event = copy.deepcopy(VALID)
    target = event
    *parents, leaf = path.split(".")
    for key in parents:
        target = target.setdefault(key, {})
    if value is KeyError:
        target.pop(leaf)
    else:
        target[leaf] = value
    return event


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (_mutate("anonymousId", KeyError), "rule:identity"),
        (_mutate("type", "track"), "rule:track_has_event_name"),
        (_mutate("type", "alias"), "rule:alias_has_previous_id"),
        (_mutate("type", "group"), "rule:group_has_group_id"),
        (_mutate("type", "pageview"), "invalid:type"),
        (_mutate("properties.load_time_ms", -1), "invalid:properties.load_time_ms"),
        (_mutate("properties.engaged_ms", -1), "invalid:properties.engaged_ms"),
        (_mutate("properties.engaged_ms", "1200"), "invalid:properties.engaged_ms"),
        (_mutate("properties.results_count", "3"), "invalid:properties.results_count"),
        # Beyond a bigint, which both layers parse it into.
        (_mutate("properties.results_count", 2**63), "invalid:properties.results_count"),
        (_mutate("timestamp", "yesterday"), "invalid:timestamp"),
        (_mutate("event_id", KeyError), "missing:event_id"),
        (_mutate("context.page.url", 5), "invalid:context.page.url"),
        (_mutate("properties", [1]), "invalid:properties"),
        (_mutate("contract_version", "v1"), "invalid:contract_version"),
    ],
)
def test_invalid_events_are_rejected_with_a_stable_reason(validate, event, reason):
    with pytest.raises(ValidationFailure) as info:
        validate(event)
    assert info.value.reason == reason
    assert info.value.detail


def test_json_schema_is_derived_from_the_contract(contract):
    schema = to_json_schema(contract)
    assert set(schema["required"]) == {
        "event_id",
        "messageId",
        "type",
        "timestamp",
        "receivedAt",
        "source_id",
        "contract_version",
    }
    assert schema["properties"]["properties"]["properties"]["load_time_ms"]["minimum"] == 0
    assert schema["properties"]["timestamp"]["format"] == "date-time"


def test_spark_schema_is_derived_from_the_contract(contract):
    from pyspark.sql import types as T

    from data_contracts.derive import to_spark_schema

    schema = to_spark_schema(contract)
    assert schema["timestamp"].dataType == T.TimestampType()
    props = schema["properties"].dataType
    assert props["load_time_ms"].dataType == T.DoubleType()
    assert props["results_count"].dataType == T.LongType()
    assert props["engaged_ms"].dataType == T.DoubleType()
    assert schema["traits"].dataType == T.StringType()  # free-form JSON kept as text
    assert schema["context"].dataType["page"].dataType["path"].dataType == T.StringType()


def test_current_contracts_do_not_break_published_versions(contract):
    check_compatibility(contract)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s.pop("event_id"), "event_id: removed"),
        (lambda s: s.update(event_id=FieldShape("integer", True)), "type changed"),
        (lambda s: s.update(userId=FieldShape("string", True)), "optional to required"),
        (lambda s: s.update(type=FieldShape("string", True, ("page", "track"))), "values removed"),
        (lambda s: s.update(new_field=FieldShape("string", True)), "new required field"),
    ],
)
def test_breaking_changes_are_detected(contract, change, expected):
    before = shape_of(contract)
    after = dict(before)
    change(after)
    problems = breaking_changes(before, after)
    assert any(expected in p for p in problems), problems


def test_compatible_changes_pass(contract):
    before = shape_of(contract)
    after = dict(before) | {"properties.scroll_depth": FieldShape("number", False)}
    enum = (*before["type"].enum, "page_leave")
    after["type"] = FieldShape("string", True, enum)
    assert breaking_changes(before, after) == []


def test_every_reader_and_writer_of_major_1_gets_the_newest_minor(contract):
    from core.collector_settings import CollectorSettings
    from data_contracts.compat import published_shapes
    from ingest.intake import Intake
    from tests.support.web import WEB_EVENTS

    newest = max(published_shapes(contract), key=lambda v: tuple(map(int, v.split("."))))
    assert contract.version == newest == "1.1.0"
    assert Intake.of_collector(CollectorSettings()).contract.version == newest
    assert WEB_EVENTS.load_contract().version == newest  # what the speed layer parses with
    assert load_contract(WEB_EVENTS.contract, WEB_EVENTS.contract_major).version == newest


def test_unknown_contract_names_what_exists():
    with pytest.raises(ContractError, match="Available"):
        load_contract("web_events", 9)


def test_both_validators_agree_on_simulated_traffic(contract):
    from datetime import UTC, datetime

    from ingest.enrich import EnrichError, RequestFacts, enrich
    from ingest.simulator import SimulatorConfig, generate

    reference, fast = compile_validator(contract), compile_fast_validator(contract)
    facts = RequestFacts(datetime.now(UTC), "site", contract.version)
    outcomes = []
    for sim in generate(SimulatorConfig(seed=3, events=2000, invalid_rate=0.2)):
        try:
            event = enrich(sim.payload, facts)
        except (EnrichError, AttributeError, TypeError):
            continue  # not an object: never reaches a validator
        verdicts = []
        for check in (reference, fast):
            try:
                check(event)
                verdicts.append("ok")
            except ValidationFailure as exc:
                verdicts.append(exc.reason)
        outcomes.append(verdicts)
    assert all(a == b for a, b in outcomes), [o for o in outcomes if o[0] != o[1]][:5]
    assert sum(1 for a, _ in outcomes if a != "ok") > 100  # the corpus has invalid events
