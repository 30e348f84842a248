"""The compatibility check on whole contracts: what it lets ship as a minor, what needs a v2."""

from __future__ import annotations

import copy

import pytest

from data_contracts import Contract, ContractError, load_contract
from data_contracts.__main__ import main
from data_contracts.compat import breaking_changes, check_compatibility, published_shapes
from tests.unit.data_contracts.contract_edits import RAW, contract_from, edited, removed

V2_NEEDED = (
    "make the change a new major version: data_contracts/web_events/v2.odcs.yaml, "
    "version 2.0.0, on a new topic web.events.v2, run beside web.events.v1"
)

RETYPED = {"logicalType": "integer", "physicalType": "long", "logicalTypeOptions": None}
"""What makes a string field an integer, for ``edited`` (None drops its string options)."""


def _as_version(contract: Contract, version: str) -> Contract:
    """``contract`` declaring ``version``: its author bumped it, as publishing needs."""
    return Contract(contract.name, contract.document.model_copy(update={"version": version}))


def test_the_contract_check_passes(capsys):
    assert main(["check"]) == 0
    assert "ok        web-events/1.1.0" in capsys.readouterr().out


def test_1_1_adds_engaged_time_and_nothing_else():
    shapes = published_shapes(load_contract("web_events", 1))
    assert list(shapes) == ["1.0.0", "1.1.0"]
    added = {path: shapes["1.1.0"][path] for path in set(shapes["1.1.0"]) - set(shapes["1.0.0"])}
    assert {p: (s.type, s.required) for p, s in added.items()} == {
        "properties.engaged_ms": ("number", False)
    }
    assert breaking_changes(shapes["1.0.0"], shapes["1.1.0"]) == []


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (
            lambda: edited(event_id=RETYPED),
            "event_id: type changed from string to integer",
        ),
        (lambda: removed("receivedAt"), "receivedAt: removed"),
        (lambda: removed("properties.load_time_ms"), "properties.load_time_ms: removed"),
        (
            lambda: edited(anonymousId={"required": True}),
            "anonymousId: changed from optional to required",
        ),
    ],
)
def test_a_breaking_change_to_major_1_is_refused_and_names_its_new_topic(change, problem):
    contract = _as_version(change(), "1.2.0")
    with pytest.raises(ContractError) as refused:
        check_compatibility(contract)
    message = str(refused.value)
    assert message.startswith("web-events/1.2.0 breaks its published versions")
    for published in ("1.0.0", "1.1.0"):
        assert f"vs {published}: {problem}" in message
    assert V2_NEEDED in message


def test_editing_the_published_1_1_in_place_is_refused():
    with pytest.raises(ContractError, match=r"published version 1\.1\.0 was edited in place"):
        check_compatibility(edited(properties__engaged_ms={"logicalType": "integer"}))


def _v2(topic: str) -> Contract:
    """The breaking change made right: ``event_id`` retyped in a 2.0.0 on ``topic``."""
    document = copy.deepcopy(RAW)
    document["version"] = "2.0.0"
    for item in document["customProperties"]:
        if item["property"] == "kafka.topic":
            item["value"] = topic
    event_id = next(p for p in document["schema"][0]["properties"] if p["name"] == "event_id")
    event_id.update(logicalType="integer", physicalType="long")
    event_id.pop("logicalTypeOptions")
    return contract_from(document)


def test_a_v2_on_its_own_topic_passes():
    check_compatibility(_v2("web.events.v2"))  # no 2.x published yet: nothing to break


def test_a_v2_on_the_v1_topic_is_refused():
    with pytest.raises(ContractError) as refused:
        check_compatibility(_v2("web.events.v1"))
    message = str(refused.value)
    assert "web-events/2.0.0 writes to web.events.v1, the topic of web-events/1.1.0" in message
    assert "to web.events.v2" in message
