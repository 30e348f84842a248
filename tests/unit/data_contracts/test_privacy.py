"""How the contract's personal fields are handled: read from the contract, refused when unstated."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest

from core.frames import local_frame
from data_contracts import Contract, ContractError, load_contract
from data_contracts.derive import anonymised_fields, field_handling, hidden_in_sql, sql_view
from tests.unit.data_contracts.contract_edits import RAW, contract_from, edited, handling


def test_the_contract_states_the_handling_of_each_restricted_field():
    found = field_handling(load_contract("web_events", 1))
    assert {p: (h.anonymise, h.expose_in_sql) for p, h in found.items() if h.restricted} == {
        "userId": ("keep", False),
        "traits": ("keep", False),
        "context.userAgent": ("keep", False),
        "context.ip": ("truncate_ip", False),
    }
    assert anonymised_fields(load_contract("web_events", 1)) == {"context.ip": "truncate_ip"}


def test_a_restricted_field_without_a_handling_is_refused():
    with pytest.raises(ContractError, match=r"'context\.userAgent' is classified restricted"):
        field_handling(edited(context__userAgent={"customProperties": None}))
    # exposeInSql alone is not enough: what the collector writes must be stated.
    with pytest.raises(ContractError, match="'traits' is classified restricted"):
        field_handling(edited(traits={"customProperties": handling(expose=True)}))


def test_a_new_restricted_field_must_state_its_handling_too():
    # Classifying a field restricted is what makes the handling required.
    unstated = edited(anonymousId={"classification": "restricted"})
    with pytest.raises(ContractError, match="'anonymousId' is classified restricted"):
        field_handling(unstated)
    hashed = edited(
        anonymousId={"classification": "restricted", "customProperties": handling("hash")}
    )
    assert field_handling(hashed)["anonymousId"].anonymise == "hash"
    assert "anonymousId" in hidden_in_sql(hashed)  # restricted: hidden unless allowed


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"customProperties": handling("mask")}, "anonymise 'mask'; use one of"),
        ({"customProperties": handling("keep", "no")}, "exposeInSql 'no'; use true or false"),
        # A keyed hash is 64 hex digits: a field shorter than that could not hold it.
        (
            {"customProperties": handling("hash"), "logicalTypeOptions": {"maxLength": 32}},
            "not a string of up to at least 64",
        ),
    ],
)
def test_a_handling_the_platform_cannot_apply_is_refused(changes, message):
    with pytest.raises(ContractError, match=message):
        field_handling(edited(context__userAgent=changes))


def test_only_strings_can_be_anonymised():
    with pytest.raises(ContractError, match="'traits' is anonymised"):
        field_handling(edited(traits={"customProperties": handling("hash")}))


def test_a_field_in_an_array_can_be_neither_rewritten_nor_hidden():
    document = copy.deepcopy(RAW)
    tags = {
        "name": "tags",
        "logicalType": "array",
        "physicalType": "array",
        "description": "Tags.",
        "items": {"name": "tag", "logicalType": "string", "classification": "restricted"},
    }
    document["schema"][0]["properties"].append(tags)
    tags["items"]["customProperties"] = handling("keep")
    with pytest.raises(ContractError, match=r"'tags\.\[\]' lies in an array"):
        field_handling(contract_from(document))
    tags["items"]["customProperties"] = handling("keep", True)
    allowed = contract_from(document)
    assert field_handling(allowed)["tags.[]"].expose_in_sql is True


def test_exposure_defaults_and_overrides():
    contract = edited(
        context__userAgent={"customProperties": handling("keep", True)},
        name={"customProperties": handling(expose=False)},
    )
    hidden = hidden_in_sql(contract)
    assert "context.userAgent" not in hidden  # restricted, explicitly allowed
    assert "name" in hidden  # not restricted, explicitly hidden
    assert "anonymousId" not in hidden  # not restricted, nothing stated


def test_the_edited_contract_keeps_the_published_shape():
    from data_contracts.compat import shape_of

    original = load_contract("web_events", 1)
    changed = edited(context__ip={"customProperties": handling("hash", True)})
    assert shape_of(changed) == shape_of(original)


def _silver(spark, contract: Contract, event: dict):
    """``event`` as silver holds it: parsed from a Kafka record by the views' input rules."""
    from views.input import parse_records

    record = [(json.dumps(event).encode(), 0, 0)]
    records = local_frame(spark, record, "value binary, partition int, offset long")
    valid, _ = parse_records(records, contract, timedelta(seconds=60))
    return valid.drop("partition", "offset")


EVENT = {
    "event_id": "e1",
    "messageId": "e1",
    "type": "identify",
    "userId": "u-1",
    "anonymousId": "a-1",
    "traits": {"plan": "pro"},
    "context": {
        "ip": "192.0.2.0",
        "userAgent": "Mozilla/5.0",
        "locale": "en-GB",
        "page": {"path": "/"},
    },
    "timestamp": "2026-11-21T10:00:00.000Z",
    "receivedAt": "2026-11-21T10:00:00.000Z",
    "source_id": "s",
    "contract_version": "1.0.0",
}


def test_sql_view_of_silver_events_hides_the_fields_not_exposed(spark):
    contract = load_contract("web_events", 1)
    silver = _silver(spark, contract, EVENT)
    view = sql_view(silver, contract)
    gone = {"userId", "traits"}
    assert view.columns == [c for c in silver.columns if c not in gone]
    context = view.schema["context"].dataType.fieldNames()
    assert context == [
        f for f in silver.schema["context"].dataType.fieldNames() if f not in {"userAgent", "ip"}
    ]
    (row,) = view.collect()
    assert (row.anonymousId, row.context.locale, row.context.page.path) == ("a-1", "en-GB", "/")
    assert (row.event_time, row.event_date) == (
        silver.first().event_time,
        silver.first().event_date,
    )


def test_sql_view_follows_the_contract(spark):
    # Allow the user agent, hide the whole page object: the view changes with the contract.
    contract = edited(
        context__userAgent={"customProperties": handling("keep", True)},
        context__page={"customProperties": handling(expose=False)},
    )
    view = sql_view(_silver(spark, contract, EVENT), contract)
    assert view.schema["context"].dataType.fieldNames() == [
        "userAgent",
        "locale",
        "campaign",
        "library",
    ]
    assert view.first().context.userAgent == "Mozilla/5.0"


def test_a_struct_left_without_fields_is_dropped(spark):
    contract = load_contract("web_events", 1)
    frame = local_frame(
        spark,
        [("e1", ("Mozilla/5.0", "192.0.2.0"))],
        "event_id string, context struct<userAgent: string, ip: string>",
    )
    assert sql_view(frame, contract).columns == ["event_id"]


def test_loading_a_contract_file_refuses_an_unstated_handling(tmp_path, monkeypatch):
    import yaml

    from data_contracts import contract as contract_module

    document = copy.deepcopy(RAW)
    user = next(p for p in document["schema"][0]["properties"] if p["name"] == "userId")
    del user["customProperties"]
    (tmp_path / "web_events").mkdir()
    (tmp_path / "web_events" / "v1.odcs.yaml").write_text(yaml.safe_dump(document))
    monkeypatch.setattr(contract_module, "CONTRACTS_DIR", tmp_path)
    contract_module.load_contract.cache_clear()
    try:
        with pytest.raises(ContractError, match="'userId' is classified restricted"):
            contract_module.load_contract("web_events", 1)
    finally:
        contract_module.load_contract.cache_clear()
